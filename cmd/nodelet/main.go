// Command nodelet is a Kubernetes node agent and its own CRI container runtime in one binary.
package main

import (
	"os"

	"github.com/nodelet/nodelet/cmd/nodelet/app"
	_ "github.com/nodelet/nodelet/internal/initstack" // grows the stack before the other inits run
)

func main() {
	os.Exit(app.Execute())
}
