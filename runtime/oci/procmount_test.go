package oci

import (
	"reflect"
	"testing"
)

// The kubelet sends empty masked and read-only lists for procMount Unmasked, and CRI delivers them
// as none: in a container with its own user namespace that leaves /proc unmasked; a container
// sharing the host's users is never left unmasked by lists that did not come.
func TestProcMountUnmasked(t *testing.T) {
	for _, c := range []struct {
		name           string
		userns         bool
		masked, ro     []string
		wantMasked     []string
		wantReadonly   []string
		wantNoneMasked bool
	}{
		{name: "user namespace, no lists", userns: true, wantNoneMasked: true},
		{name: "host users, no lists", wantMasked: DefaultMaskedPaths, wantReadonly: DefaultReadonlyPaths},
		{name: "user namespace, the default lists", userns: true, masked: DefaultMaskedPaths, ro: DefaultReadonlyPaths,
			wantMasked: DefaultMaskedPaths, wantReadonly: DefaultReadonlyPaths},
		{name: "lists sent", masked: []string{"/proc/kcore"}, ro: []string{"/proc/sys"},
			wantMasked: []string{"/proc/kcore"}, wantReadonly: []string{"/proc/sys"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := baseInput(t)
			if c.userns {
				in.UserNSPath = "/proc/1/ns/user"
			}
			in.Config.Linux.SecurityContext.MaskedPaths = c.masked
			in.Config.Linux.SecurityContext.ReadonlyPaths = c.ro
			s, err := Generate(in)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantNoneMasked {
				if len(s.Linux.MaskedPaths) != 0 || len(s.Linux.ReadonlyPaths) != 0 {
					t.Fatalf("masked %q read-only %q; want /proc unmasked", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
				}
				return
			}
			if !reflect.DeepEqual(s.Linux.MaskedPaths, c.wantMasked) || !reflect.DeepEqual(s.Linux.ReadonlyPaths, c.wantReadonly) {
				t.Fatalf("masked %q read-only %q", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
			}
		})
	}
}
