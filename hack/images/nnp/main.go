// Command nnp is the stand-in of registry.k8s.io/e2e-test-images/nonewprivs: installed setuid root,
// it prints the effective uid it got, which tells whether no_new_privs stopped the escalation.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("Effective uid: %d\n", os.Geteuid())
}
