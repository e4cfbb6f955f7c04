// Command fakeprices serves a fake Azure Retail Prices API on loopback, for
// checking `gpumarket prices --provider azure` by hand without the
// internet:
//
//	go run ./cloud/azure/azuretest/fakeprices -listen 127.0.0.1:8089
//	GPUMARKET_AZURE_PRICES_URL=http://127.0.0.1:8089/api/retail/prices \
//	    go run . prices --provider azure --region eastus,westeurope -o json
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/gpumarket/gpumarket/cloud/azure/azuretest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8089", "address to listen on")
	data := flag.String("data", "testdata/azure/retailprices/items.json", "JSON array of Retail Prices items (run from the repository root)")
	pageSize := flag.Int("page-size", 4, "items per page (small, so that clients must follow NextPageLink)")
	flag.Parse()
	srv, err := azuretest.LoadPrices(*data, *pageSize)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeprices:", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/retail/prices", srv)
	log.Printf("fake Retail Prices API on http://%s/api/retail/prices (%d items, %d a page)", *listen, len(srv.Items), *pageSize)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
