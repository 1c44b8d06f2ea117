package testutil

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// MountsUnder lists the mount points at or below any of the given paths.
func MountsUnder(paths ...string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, p := range paths {
			if mp == p || strings.HasPrefix(mp, strings.TrimSuffix(p, "/")+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// ProcessesMentioning lists the PIDs whose command line contains s (for example a test's temp
// dir), so a test can prove it left no process behind.
func ProcessesMentioning(s string) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if e.Name() == strconv.Itoa(self) {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if strings.Contains(string(b), s) {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// CheckNoLeaks registers a cleanup (run after the test's other cleanups, so register it first) that
// fails the test if mounts below dirs or processes mentioning them remain.
func CheckNoLeaks(t testing.TB, dirs ...string) {
	t.Helper()
	t.Cleanup(func() {
		if m := MountsUnder(dirs...); len(m) > 0 {
			t.Errorf("mounts left behind: %v", m)
		}
		for _, d := range dirs {
			if p := ProcessesMentioning(d); len(p) > 0 {
				t.Errorf("processes left behind: %v", p)
			}
		}
	})
}
