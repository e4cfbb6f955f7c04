// Package azuretest has fakes of Azure's public endpoints for tests and for
// checking gpumarket by hand: a Retail Prices API server that pages its
// items like the real one.
package azuretest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// PricesServer serves Retail Prices API pages from a fixed list of items.
// It honours the armRegionName clause of $filter and ignores the rest (a
// compatible endpoint may), so a client must check every item itself.
// Pages hold PageSize items and link to the next by an absolute
// NextPageLink with $skip, as the real API does; the last page's
// NextPageLink is null. It follows the API's documented sample response
// and paging (https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices:
// BillingCurrency, CustomerEntityId, CustomerEntityType, Items,
// NextPageLink, Count).
type PricesServer struct {
	Items    []json.RawMessage
	PageSize int

	mu      sync.Mutex
	filters []string
	pages   int
	faults  []int
}

// FailNext answers the next requests, one each, with these HTTP statuses
// instead of a page: 429 with Retry-After (the API's throttling answer),
// 408, 5xx. The API documents no rate limit; it throttles when pressed.
func (s *PricesServer) FailNext(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, statuses...)
}

// LoadPrices reads a JSON array of Retail Prices items.
func LoadPrices(path string, pageSize int) (*PricesServer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read retail prices items: %w", err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, fmt.Errorf("retail prices items %s: want a JSON array of items: %w", path, err)
	}
	if pageSize <= 0 {
		return nil, fmt.Errorf("page size %d: want a positive number", pageSize)
	}
	return &PricesServer{Items: items, PageSize: pageSize}, nil
}

var regionClause = regexp.MustCompile(`armRegionName eq '([^']*)'`)

// ServeHTTP answers one page.
func (s *PricesServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if len(s.faults) > 0 {
		status := s.faults[0]
		s.faults = s.faults[1:]
		s.mu.Unlock()
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "3")
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"Error":{"Code":"%d","Message":"%s"}}`, status, http.StatusText(status))
		return
	}
	s.mu.Unlock()
	filter := r.URL.Query().Get("$filter")
	skip, _ := strconv.Atoi(r.URL.Query().Get("$skip"))
	region := ""
	if m := regionClause.FindStringSubmatch(filter); m != nil {
		region = m[1]
	}
	var match []json.RawMessage
	for _, raw := range s.Items {
		var it struct {
			ArmRegionName string `json:"armRegionName"`
		}
		if json.Unmarshal(raw, &it) == nil && (region == "" || strings.EqualFold(it.ArmRegionName, region)) {
			match = append(match, raw)
		}
	}
	s.mu.Lock()
	if skip == 0 {
		s.filters = append(s.filters, filter)
	}
	s.pages++
	s.mu.Unlock()
	end := min(skip+s.PageSize, len(match))
	page := []json.RawMessage{}
	if skip < len(match) {
		page = match[skip:end]
	}
	next := ""
	if end < len(match) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		q := r.URL.Query()
		q.Set("$skip", strconv.Itoa(end))
		next = scheme + "://" + r.Host + r.URL.Path + "?" + strings.ReplaceAll(q.Encode(), "+", "%20")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
		"Items": page, "NextPageLink": nullable(next), "Count": len(page),
	})
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Filters returns the $filter of every first-page request so far.
func (s *PricesServer) Filters() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.filters...)
}

// Pages counts the pages served.
func (s *PricesServer) Pages() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages
}
