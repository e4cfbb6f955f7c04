// Package gcptest is a local Google Cloud for tests and acceptance checks:
// an OAuth token endpoint for service-account keys, and the Compute
// Engine, Cloud Billing Catalog and Cloud Monitoring REST APIs as the
// discovery documents of google.golang.org/api describe them
// (compute/v1/compute-api.json, cloudbilling/v1/cloudbilling-api.json,
// monitoring/v3/monitoring-api.json): JSON of their schemas, lists paged
// by nextPageToken, operations that finish on a later poll, and 429 and
// 503 answers on demand. It serves the paths under the base URLs the
// client libraries take: /compute/v1/, /v1/ (billing), /v3/ (monitoring).
package gcptest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	billing "google.golang.org/api/cloudbilling/v1"
	"google.golang.org/api/compute/v1"
)

// Project is the fake's project.
const Project = "gpumarket-test"

// Options configure the fake; every field is optional.
type Options struct {
	Zones []Zone
	SKUs  []*billing.Sku
	// PageSize caps every list page (default 3), so every list pages.
	PageSize int
	// OpPolls is how many polls an operation takes to be DONE (default
	// 2: PENDING when made, RUNNING at the first poll, DONE at the second).
	OpPolls int
	// AgentGPU makes the fleet VMs report the Ops Agent's GPU metric.
	AgentGPU bool
	Now      func() time.Time
	// Listener, when set, is where the fake serves (fakegcp's address).
	Listener net.Listener
}

// Server is the fake Google Cloud.
type Server struct {
	*httptest.Server
	opt Options
	key *rsa.PrivateKey

	mu       sync.Mutex
	tokens   map[string]bool
	throttle []throttled // what the next API requests get
	fail     map[string]apiError
	failOp   map[string]opFailure
	outcome  map[string]*compute.Operation // error an operation shows once DONE, by name
	drop     map[string]int                // answers to lose, by call
	after    map[string]int                // status to answer after doing the call, by call
	ops      map[string]*compute.Operation
	opPolls  map[string]int
	byReq    map[string]string // requestId → operation name
	frs      map[string]*compute.FutureReservation
	vms      map[string]*vm
	nOps     int
	// Calls counts the API requests by call name ("machineTypes.aggregatedList").
	Calls map[string]int
}

type apiError struct {
	code           int
	reason, status string
	msg            string
}

type opFailure struct{ code, msg string }

type throttled struct {
	code       int
	retryAfter string
}

type vm struct {
	in      *compute.Instance
	created time.Time
	ended   time.Time
	id      uint64
}

// New starts the fake.
func New(opt Options) *Server {
	if opt.Zones == nil {
		opt.Zones = DefaultZones()
	}
	if opt.SKUs == nil {
		opt.SKUs = DefaultSKUs()
	}
	if opt.PageSize <= 0 {
		opt.PageSize = 3
	}
	if opt.OpPolls <= 0 {
		opt.OpPolls = 2
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s := &Server{opt: opt, key: key, tokens: map[string]bool{}, fail: map[string]apiError{}, failOp: map[string]opFailure{},
		outcome: map[string]*compute.Operation{},
		drop:    map[string]int{}, after: map[string]int{}, ops: map[string]*compute.Operation{}, opPolls: map[string]int{}, byReq: map[string]string{},
		frs: map[string]*compute.FutureReservation{}, vms: map[string]*vm{}, Calls: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if opt.Listener != nil {
		s.Listener.Close()
		s.Listener = opt.Listener
	}
	s.Start()
	return s
}

// Endpoints are the base URLs to give the client libraries.
func (s *Server) Endpoints() (computeURL, billingURL, monitoringURL string) {
	return s.URL + "/compute/v1/", s.URL + "/", s.URL + "/"
}

// KeyFile writes a service-account key file whose token_uri is the fake's
// token endpoint, and returns its path.
func (s *Server) KeyFile(dir string) (string, error) {
	der, err := x509.MarshalPKCS8PrivateKey(s.key)
	if err != nil {
		return "", err
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	data, err := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": Project, "private_key_id": "fake-key-1", "private_key": string(pemKey),
		"client_email": "gpumarket@" + Project + ".iam.gserviceaccount.com", "client_id": "1000000000000000000",
		"auth_uri": s.URL + "/auth", "token_uri": s.URL + "/token", "universe_domain": "googleapis.com",
	}, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "gcp-key.json")
	return p, os.WriteFile(p, data, 0o600)
}

// Throttle makes the next API requests answer with these status codes
// (429, 503) before answering normally.
func (s *Server) Throttle(codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range codes {
		s.throttle = append(s.throttle, throttled{code: c})
	}
}

// ThrottleRetryAfter makes the next API request answer code with this
// Retry-After header: delay-seconds or an HTTP-date (RFC 9110 section
// 10.2.3, "Retry-After = HTTP-date / delay-seconds").
func (s *Server) ThrottleRetryAfter(code int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = append(s.throttle, throttled{code, retryAfter})
}

// Fail makes the next request of a call answer with a Google error.
func (s *Server) Fail(call string, code int, reason, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[call] = apiError{code: code, reason: reason, msg: msg, status: statusOf(code)}
}

// FailOperation makes the next operation of a call end in this error.
func (s *Server) FailOperation(call, code, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failOp[call] = opFailure{code, msg}
}

// FailAfter makes the next request of a call be carried out and then
// answered with a 5xx, as a backend that did the work and failed to say so.
func (s *Server) FailAfter(call string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.after[call] = code
}

// LoseAnswer makes the next request of a call be carried out and its
// answer lost (the connection closes).
func (s *Server) LoseAnswer(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop[call]++
}

func statusOf(code int) string {
	return map[int]string{400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS",
		429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}[code]
}

// writeError answers in Google's JSON error form, as
// googleapi.CheckResponse reads it. Compute Engine gives the reason in
// "errors": [{"reason", "domain", "message"}]; the newer APIs (Billing
// Catalog, Monitoring: an errorInfo writer) give it in an ErrorInfo
// detail, as the API design guide's example shows: {"error": {"code":
// 400, "message": "API key not valid. …", "status": "INVALID_ARGUMENT",
// "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
// "reason": "API_KEY_INVALID", "domain": "googleapis.com", "metadata":
// {"service": "translate.googleapis.com"}}]}}.
func writeError(w http.ResponseWriter, e apiError) {
	body := map[string]any{"code": e.code, "message": e.msg, "status": e.status}
	if iw, ok := w.(errorInfo); ok {
		w = iw.ResponseWriter
		// ErrorInfo's reason "should … match a regular expression of
		// [A-Z][A-Z0-9_]+[A-Z0-9]" (google/rpc/error_details.proto): a
		// Compute-style reason is not one, and is left out.
		if upperSnake.MatchString(e.reason) {
			body["details"] = []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason,
				"domain": "googleapis.com", "metadata": map[string]string{"service": iw.service}}}
		}
	} else {
		// Quota reasons are in domain usageLimits, as Google's standard
		// error example shows: {"domain": "usageLimits", "reason":
		// "rateLimitExceeded", "message": "Rate Limit Exceeded"}.
		domain := "global"
		if e.reason == "rateLimitExceeded" || e.reason == "quotaExceeded" {
			domain = "usageLimits"
		}
		body["errors"] = []map[string]string{{"message": e.msg, "domain": domain, "reason": e.reason}}
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.code)
	json.NewEncoder(w).Encode(map[string]any{"error": body})
}

var upperSnake = regexp.MustCompile(`^[A-Z][A-Z0-9_]+[A-Z0-9]$`)

// errorInfo marks the answers of an API whose errors carry ErrorInfo.
type errorInfo struct {
	http.ResponseWriter
	service string
}

// serviceOf names the newer APIs' services by call; Compute's calls are
// not named.
func serviceOf(call string) string {
	switch call {
	case "services.skus.list":
		return "cloudbilling.googleapis.com"
	case "projects.timeSeries.list":
		return "monitoring.googleapis.com"
	}
	return ""
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		s.token(w, r)
		return
	}
	if !s.authorized(r) {
		writeError(w, apiError{code: 401, reason: "authError", status: "UNAUTHENTICATED", msg: "Request had invalid authentication credentials. Expected OAuth 2 access token."})
		return
	}
	call, h := s.route(r)
	api := w
	if svc := serviceOf(call); svc != "" {
		api = errorInfo{w, svc}
	}
	s.mu.Lock()
	s.Calls[call]++
	if len(s.throttle) > 0 {
		t := s.throttle[0]
		s.throttle = s.throttle[1:]
		s.mu.Unlock()
		if t.retryAfter != "" {
			w.Header().Set("Retry-After", t.retryAfter)
		}
		writeError(api, throttleError(t.code, api != w))
		return
	}
	if e, ok := s.fail[call]; ok {
		delete(s.fail, call)
		s.mu.Unlock()
		writeError(api, e)
		return
	}
	lose := s.drop[call] > 0
	if lose {
		s.drop[call]--
	}
	after, failAfter := s.after[call]
	delete(s.after, call)
	s.mu.Unlock()
	if h == nil {
		writeError(api, apiError{code: 404, reason: "notFound", status: "NOT_FOUND", msg: "The fake does not serve " + r.Method + " " + r.URL.Path})
		return
	}
	if failAfter {
		h(httptest.NewRecorder(), r)
		writeError(api, apiError{code: after, reason: "backendError", status: statusOf(after), msg: "Internal error. Please try again."})
		return
	}
	if lose {
		h(httptest.NewRecorder(), r)
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
		return
	}
	h(api, r)
}

// throttleError is a 429 or 503 as each API words it: Compute's
// rateLimitExceeded and backendError reasons; the newer APIs' ErrorInfo
// reason RATE_LIMIT_EXCEEDED on a 429, and no detail on a 503.
func throttleError(code int, errorInfo bool) apiError {
	e := apiError{code: code, status: statusOf(code), msg: "Quota exceeded or service unavailable; retry with backoff."}
	switch {
	case errorInfo && code == http.StatusTooManyRequests:
		e.reason = "RATE_LIMIT_EXCEEDED"
	case errorInfo:
	case code == http.StatusTooManyRequests:
		e.reason = "rateLimitExceeded"
	default:
		e.reason = "backendError"
	}
	return e
}

// token follows Google's OAuth 2.0 for server-to-server applications: a
// POST of grant_type urn:ietf:params:oauth:grant-type:jwt-bearer and an
// RS256-signed assertion, answered with access_token, token_type and
// expires_in. The signature is checked against the key file's key.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		tokenError(w, "unsupported_grant_type", "Invalid grant_type.")
		return
	}
	parts := strings.Split(r.Form.Get("assertion"), ".")
	if len(parts) != 3 {
		tokenError(w, "invalid_grant", "Invalid JWT.")
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		tokenError(w, "invalid_grant", "Invalid JWT Signature.")
		return
	}
	tok := fmt.Sprintf("ya29.fake-%d", time.Now().UnixNano())
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	writeJSON(w, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3599})
}

// tokenError answers as Google's token endpoint refuses a grant: 400 and
// {"error", "error_description"} in JSON (RFC 6749 section 5.2).
func tokenError(w http.ResponseWriter, code, desc string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

func (s *Server) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	return ok && s.tokens[tok]
}

// route names the call a request makes and its handler (nil: not served).
func (s *Server) route(r *http.Request) (string, http.HandlerFunc) {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	get, post, del := r.Method == http.MethodGet, r.Method == http.MethodPost, r.Method == http.MethodDelete
	switch {
	case len(p) == 4 && p[0] == "v1" && p[1] == "services" && p[3] == "skus" && get:
		return "services.skus.list", s.skus
	case len(p) == 4 && p[0] == "v3" && p[1] == "projects" && p[3] == "timeSeries" && get:
		return "projects.timeSeries.list", s.timeSeries
	case len(p) < 5 || p[0] != "compute" || p[1] != "v1" || p[2] != "projects" || p[3] != Project:
		return "unknown", nil
	}
	p = p[4:]
	switch {
	case len(p) == 2 && p[0] == "aggregated" && p[1] == "machineTypes" && get:
		return "machineTypes.aggregatedList", s.machineTypes
	case len(p) == 2 && p[0] == "aggregated" && p[1] == "acceleratorTypes" && get:
		return "acceleratorTypes.aggregatedList", s.acceleratorTypes
	case len(p) == 2 && p[0] == "aggregated" && p[1] == "futureReservations" && get:
		return "futureReservations.aggregatedList", s.aggregatedFRs
	case len(p) == 2 && p[0] == "aggregated" && p[1] == "instances" && get:
		return "instances.aggregatedList", s.instances
	case len(p) == 4 && p[0] == "regions" && p[2] == "advice" && p[3] == "calendarMode" && post:
		return "advice.calendarMode", func(w http.ResponseWriter, r *http.Request) { s.calendarMode(w, r, p[1]) }
	case len(p) == 4 && p[0] == "regions" && p[2] == "instances" && p[3] == "bulkInsert" && post:
		return "regionInstances.bulkInsert", func(w http.ResponseWriter, r *http.Request) { s.bulkInsert(w, r, p[1]) }
	case len(p) == 3 && p[0] == "zones" && p[2] == "futureReservations" && post:
		return "futureReservations.insert", func(w http.ResponseWriter, r *http.Request) { s.insertFR(w, r, p[1]) }
	case len(p) == 3 && p[0] == "zones" && p[2] == "futureReservations" && get:
		return "futureReservations.list", func(w http.ResponseWriter, r *http.Request) { s.listFRs(w, r, p[1]) }
	case len(p) == 4 && p[0] == "zones" && p[2] == "futureReservations" && get:
		return "futureReservations.get", func(w http.ResponseWriter, r *http.Request) { s.getFR(w, p[1], p[3]) }
	case len(p) == 4 && p[0] == "zones" && p[2] == "instances" && del:
		return "instances.delete", func(w http.ResponseWriter, r *http.Request) { s.deleteVM(w, r, p[1], p[3]) }
	case len(p) == 4 && (p[0] == "zones" || p[0] == "regions") && p[2] == "operations" && get:
		return p[0][:len(p[0])-1] + "Operations.get", func(w http.ResponseWriter, r *http.Request) { s.getOp(w, p[3]) }
	case len(p) == 3 && (p[0] == "zones" || p[0] == "regions") && p[2] == "operations" && get:
		return p[0][:len(p[0])-1] + "Operations.list", func(w http.ResponseWriter, r *http.Request) { s.listOps(w, r, p[0], p[1]) }
	}
	return "unknown", nil
}
