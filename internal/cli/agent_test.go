package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestAgentCmdFlags(t *testing.T) {
	cmd := newAgentCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--container-runtime-endpoint", "--pod-manifest-path", "--manifest-url", "--kubeconfig",
		"--hostname-override", "--node-ip", "--root-dir", "--max-pods", "--config"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("nodelet agent has no %s flag", f)
		}
	}
}

func TestAgentCmdRejectsBadConfig(t *testing.T) {
	cmd := newAgentCmd()
	cmd.SetArgs([]string{"--node-ip=not-an-ip"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "not an IP") {
		t.Fatalf("err %v", err)
	}
}
