// Command fakegcp serves the local Google Cloud of the tests (gcptest) for
// trying the gcp provider with no account: it writes a service-account key
// file whose token_uri is its own, and prints the config that points
// gpumarket at it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"

	"github.com/gpumarket/gpumarket/cloud/gcp/gcptest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4567", "address to serve on (loopback)")
	dir := flag.String("dir", os.TempDir(), "where to write the key file and the config")
	agent := flag.Bool("agent-gpu", false, "the fleet VMs report the Ops Agent's GPU metric")
	flag.Parse()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	f := gcptest.New(gcptest.Options{AgentGPU: *agent, Listener: l})
	key, err := f.KeyFile(*dir)
	if err != nil {
		log.Fatal(err)
	}
	c, b, m := f.Endpoints()
	cfg := fmt.Sprintf("providers: [gcp]\ngcp:\n  credentials_file: %s\n  image: projects/debian-cloud/global/images/family/debian-12\n"+
		"  endpoints: {compute: %q, billing: %q, monitoring: %q}\n", key, c, b, m)
	path := *dir + "/gpumarket-gcp.yaml"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("fake Google Cloud on %s\nconfig: %s\n%s", f.URL, path, cfg)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	f.Close()
}
