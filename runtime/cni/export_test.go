package cni

import "testing"

// Test helpers shared with the cni_test package, whose tests drive the whole runtime server.

type TestNet = testNet

func NewTestNet(t testing.TB) *TestNet { return newTestNet(t) }

func (tn *testNet) Allocated(t testing.TB) []string     { return tn.allocated(t) }
func (tn *testNet) VethsOnBridge(t testing.TB) []string { return tn.vethsOnBridge(t) }

func IptablesMentioning(t testing.TB, needles ...string) []string {
	return iptablesMentioning(t, needles...)
}
