package cni

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestAdminConflistWithFirewall: a conflist of the admin's (here bridge, firewall and portmap)
// takes over from the default once it sorts first, and the firewall plugin's rules come and go
// with the pods.
func TestAdminConflistWithFirewall(t *testing.T) {
	testutil.Require(t, "cni:firewall")
	tn := newTestNet(t)
	ctx := ctxT(t)
	d := tn.Net
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[
	  {"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":true,
	   "ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":%q}},
	  {"type":"firewall","backend":"iptables"},
	  {"type":"portmap","snat":true,"capabilities":{"portMappings":true}}]}`, d.Name, d.Bridge, d.Subnet, d.DataDir)
	if err := os.WriteFile(filepath.Join(tn.Dir, "net.d", "00-admin.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "admin conflist loaded", func() bool { return filepath.Base(tn.Manager.ConfigFile()) == "00-admin.conflist" })

	a, b := tn.pod(t, "fw-a"), tn.pod(t, "fw-b")
	ra, err := tn.Manager.SetUpPod(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := tn.Manager.SetUpPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ping(t, a.NetNSPath, rb.IPs[0])
	if hits := iptablesMentioning(t, "-A CNI-FORWARD -d "+ra.IPs[0]+"/32"); len(hits) == 0 {
		t.Fatal("the firewall plugin added no rule for the pod")
	}
	for _, p := range []PodNetwork{a, b} {
		if err := tn.Manager.TearDownPod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if hits := iptablesMentioning(t, ra.IPs[0]+"/32", rb.IPs[0]+"/32"); len(hits) > 0 {
		t.Errorf("firewall rules left behind:\n%s", strings.Join(hits, "\n"))
	}
	tn.assertNoLeaks(t, a.SandboxID, b.SandboxID)
}
