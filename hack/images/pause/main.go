// Command pause is the stand-in of registry.k8s.io/pause for the loopback registry of the interop
// tests: a sandbox's init that holds its namespaces, reaps orphans and exits on SIGINT or SIGTERM.
// hack/images builds it statically into the pause images.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
