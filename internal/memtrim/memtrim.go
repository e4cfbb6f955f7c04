// Package memtrim hands back to the kernel the memory a long-running
// headless process needed only to start.
package memtrim

import "runtime/debug"

// Release returns the heap's free pages and, where the system allows, drops
// the program's own code and read-only data pages from the process. Start-up
// runs every linked package's init, which touches tens of MiB of the binary
// that an idle loop never reads again; the pages it does read come back on
// the next touch from the page cache, unchanged. It returns how many bytes
// of the binary's mappings it dropped.
func Release() int64 {
	debug.FreeOSMemory()
	return releaseImage()
}
