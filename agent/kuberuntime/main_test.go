package kuberuntime

import (
	"os"
	"testing"

	"github.com/nodelet/nodelet/test/harness/crirt"
)

// TestMain removes the nodelet binary crirt built for this package's tests (~80 MB in /tmp),
// which no per-test cleanup can do since the build is shared by every test of the process.
func TestMain(m *testing.M) {
	code := m.Run()
	crirt.RemoveBinary()
	os.Exit(code)
}
