package csi

import (
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/csidriver"
	"github.com/nodelet/nodelet/test/harness/kubefake"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

const testDriver = "csi.nodelet.test"

// fixture is node n1 of a fake API (with objs), the test driver (loop devices) running, and a
// root dir whose mounts go with the test.
type fixture struct {
	root string
	d    *csidriver.Driver
	api  *fake.Clientset
	// dir is the driver's: Start on it again is the driver restarted.
	dir string
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	testutil.Require(t, "losetup", "mkfs.ext4")
	root := t.TempDir()
	t.Cleanup(func() { testutil.UnmountUnder(root) })
	dir := filepath.Join(t.TempDir(), "driver")
	d := csidriver.Start(t, dir, "", testDriver)
	objs = append([]runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}}, objs...)
	return &fixture{root: root, d: d, api: fake.NewSimpleClientset(objs...), dir: dir}
}

// manager starts the node side of CSI on the fixture (again: an agent restarted) with the
// driver registered.
func (f *fixture) manager(t *testing.T, token TokenFunc) *Manager {
	t.Helper()
	m := New(Config{NodeName: "n1", RootDir: f.root, Client: kubefake.Wrap(f.api), Token: token, Log: quiet()})
	if err := m.RegisterPlugin(f.d.Name, f.d.Endpoint, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
	return m
}
