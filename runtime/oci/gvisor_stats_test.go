package oci

import "testing"

func TestParseGvisorStats(t *testing.T) {
	// As runsc 0.0~20221219.0 prints it for a running subcontainer.
	out := `{"type":"stats","id":"c1","data":{"cpu":{"usage":{"total":129350894}},"memory":{"usage":{"limit":0,"usage":2764800,"failcnt":0},"swap":{"limit":0,"failcnt":0},"kernel":{"limit":0,"failcnt":0},"kernelTCP":{"limit":0,"failcnt":0}},"pids":{"current":2}}}` + "\n"
	got, err := ParseGvisorStats([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := GvisorStats{CPUUsageNanos: 129350894, MemoryUsage: 2764800, Pids: 2}
	if *got != want {
		t.Errorf("got %+v, want %+v", *got, want)
	}
	for _, bad := range []string{"", "{", `{"type":"oom","id":"c1"}`} {
		if _, err := ParseGvisorStats([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
