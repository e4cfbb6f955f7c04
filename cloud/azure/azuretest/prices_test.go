package azuretest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

func TestPricesServerPages(t *testing.T) {
	ps, err := LoadPrices(filepath.Join("..", "..", "..", "testdata", "azure", "retailprices", "items.json"), 7)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ps)
	defer srv.Close()
	next := srv.URL + "/api/retail/prices?$filter=" + url.QueryEscape("serviceName eq 'Virtual Machines' and armRegionName eq 'westeurope'")
	items, pages := 0, 0
	for next != "" {
		resp, err := http.Get(next)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Items []struct {
				ArmRegionName string `json:"armRegionName"`
			}
			NextPageLink *string
			Count        int
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		pages++
		items += len(page.Items)
		if page.Count != len(page.Items) || len(page.Items) > 7 {
			t.Errorf("page %d: Count %d, %d items", pages, page.Count, len(page.Items))
		}
		for _, it := range page.Items {
			if it.ArmRegionName != "westeurope" {
				t.Errorf("item of %s in a westeurope query", it.ArmRegionName)
			}
		}
		next = ""
		if page.NextPageLink != nil {
			next = *page.NextPageLink
			if !strings.HasPrefix(next, srv.URL) {
				t.Errorf("NextPageLink %q is not absolute", next)
			}
		}
	}
	if items != 42 || pages != 6 {
		t.Errorf("%d items on %d pages, want 42 on 6", items, pages)
	}
	if f := ps.Filters(); len(f) != 1 || !strings.Contains(f[0], "westeurope") {
		t.Errorf("filters = %q", f)
	}
	if _, err := LoadPrices(filepath.Join("..", "..", "..", "testdata", "azure", "retailprices", "items.json"), 0); err == nil {
		t.Errorf("page size 0 accepted")
	}
}
