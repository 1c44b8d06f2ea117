package cm

import "testing"

func TestPodCgroupNames(t *testing.T) {
	n := PodCgroups{Root: "/kubepods"}
	for _, tc := range []struct{ got, want string }{
		{n.Tier(""), "/kubepods"},
		{n.Tier("burstable"), "/kubepods/burstable"},
		{n.Pod("", "u1"), "/kubepods/podu1"},
		{n.Pod("besteffort", "u2"), "/kubepods/besteffort/podu2"},
		{PodCgroups{Root: "/"}.Pod("burstable", "u3"), "/burstable/podu3"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s, want %s", tc.got, tc.want)
		}
	}
	if uid, ok := PodUID("podu1"); !ok || uid != "u1" {
		t.Errorf("PodUID(podu1) = %q %v", uid, ok)
	}
	for _, elem := range []string{"pod", "burstable", "besteffort"} {
		if uid, ok := PodUID(elem); ok {
			t.Errorf("PodUID(%s) = %q", elem, uid)
		}
	}
}
