package cgroupfs

import (
	"reflect"
	"testing"
)

func TestCgroupfsDriver(t *testing.T) {
	for _, tc := range []struct {
		name []string
		want string
	}{
		{nil, "/"},
		{[]string{"kubepods"}, "/kubepods"},
		{[]string{"kubepods", "burstable", "pod1234-ab"}, "/kubepods/burstable/pod1234-ab"},
	} {
		if got := (Cgroupfs{}).Path(tc.name); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.name, got, tc.want)
		}
	}
	for p, want := range map[string][]string{"/": nil, "/kubepods": {"kubepods"}, "/a//b/": {"a", "b"}} {
		if got := SplitName(p); !reflect.DeepEqual(got, want) {
			t.Errorf("SplitName(%q) = %q, want %q", p, got, want)
		}
	}
}
