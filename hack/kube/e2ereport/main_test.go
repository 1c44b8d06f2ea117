package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A report as ginkgo writes it for a run with --focus: the specs outside the focus are in it as
// skipped, next to set-up nodes and the suite's own skips.
const sample = `[{"SuiteDescription": "Kubernetes e2e suite", "SpecReports": [
 {"LeafNodeType": "SynchronizedBeforeSuite", "State": "passed"},
 {"ContainerHierarchyTexts": ["[sig-node] Pods"], "LeafNodeText": "should be submitted and removed [Conformance]",
  "LeafNodeType": "It", "State": "passed", "RunTime": 3000000000},
 {"ContainerHierarchyTexts": ["[sig-node] Pods"], "LeafNodeText": "should get a host IP [Conformance]",
  "LeafNodeType": "It", "State": "failed", "Failure": {"Message": "Expected\n    <string>: \n to equal\n    <string>: 10.0.0.1\nmore"}},
 {"ContainerHierarchyTexts": ["[sig-node] Probing"], "LeafNodeText": "liveness [Conformance]",
  "LeafNodeType": "It", "State": "timedout"},
 {"ContainerHierarchyTexts": ["[sig-storage] EmptyDir"], "LeafNodeText": "on tmpfs [Conformance]",
  "LeafNodeType": "It", "State": "skipped", "Failure": {"Message": "Only supported for providers [gce] (not local)"}},
 {"ContainerHierarchyTexts": ["[sig-node] Pods"], "LeafNodeText": "should be slow [Slow]",
  "LeafNodeType": "It", "State": "skipped"},
 {"ContainerHierarchyTexts": ["[sig-apps] Deployment"], "LeafNodeText": "rolls [Conformance]",
  "LeafNodeType": "It", "State": "skipped"},
 {"LeafNodeType": "ReportAfterSuite", "State": "failed"}
]}]`

func TestSummarise(t *testing.T) {
	var reports []report
	if err := json.Unmarshal([]byte(sample), &reports); err != nil {
		t.Fatal(err)
	}
	focus := regexp.MustCompile(`\[sig-node\].*\[Conformance\]|\[sig-storage\].*\[Conformance\]`)
	for _, tc := range []struct {
		name                    string
		focus, skip             *regexp.Regexp
		passed, failed, skipped int
	}{
		// The non-conformance and sig-apps specs were filtered out by ginkgo: not counted.
		{"focus", focus, nil, 1, 2, 1},
		{"focus and skip", focus, regexp.MustCompile(`Probing`), 1, 1, 1},
		// Without a focus every It counts; set-up and report nodes never do.
		{"everything", nil, nil, 1, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := summarise(reports, tc.focus, tc.skip)
			if sum.passed != tc.passed || len(sum.failed) != tc.failed || sum.skipped != tc.skipped {
				t.Errorf("got %d passed, %d failed, %d skipped; want %d, %d, %d",
					sum.passed, len(sum.failed), sum.skipped, tc.passed, tc.failed, tc.skipped)
			}
		})
	}
	sum := summarise(reports, focus, nil)
	if got := sum.failed[0].State + " " + sum.failed[1].State; got != "failed timedout" {
		t.Errorf("failed specs in report order: got %q", got)
	}
	if len(sum.slowest) != 1 || sum.slowest[0].RunTime != 3*time.Second {
		t.Errorf("slowest: %+v", sum.slowest)
	}
	// The suite's own skips keep their reason; the specs ginkgo filtered out are not among them.
	if len(sum.skipReasons) != 1 || sum.skipReasons[0].reason != "Only supported for providers [gce] (not local)" || sum.skipReasons[0].count != 1 ||
		len(sum.skipReasons[0].specs) != 1 || sum.skipReasons[0].specs[0] != "[sig-storage] EmptyDir on tmpfs [Conformance]" {
		t.Errorf("skip reasons: got %+v", sum.skipReasons)
	}
}

// --skipped appends a section per run, naming each spec the suite skipped under its reason.
func TestSkippedList(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	if err := os.WriteFile(path, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "skipped.md")
	if err := os.WriteFile(out, []byte("# Skipped\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := appendSkipped(out, `\[sig-storage\]`, "Slow", summarise(mustReports(t), regexp.MustCompile(`\[sig-storage\]`), nil)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	want := "# Skipped\n\n## focus `\\[sig-storage\\]`\n\nskip `Slow`: 0 passed, 0 failed, 1 skipped by the suite:\n\n" +
		"### Only supported for providers [gce] (not local) (1)\n\n- [sig-storage] EmptyDir on tmpfs [Conformance]\n"
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}

func mustReports(t *testing.T) []report {
	var reports []report
	if err := json.Unmarshal([]byte(sample), &reports); err != nil {
		t.Fatal(err)
	}
	return reports
}

// A focus or skip that selects nothing is an error, never "0 passed, 0 failed".
func TestRunRefusesAnEmptySelection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(path, `\[sig-node\]`, `.`, "")
	if err == nil || !strings.Contains(err.Error(), "selected no spec") {
		t.Fatalf("run with a skip matching everything: got %v, want the empty-selection error", err)
	}
}

func TestFirstLine(t *testing.T) {
	for in, want := range map[string]string{
		"boom\nstack":                      "boom stack",
		"Expected\n    <int>: 1\nto equal": "Expected <int>: 1 to equal",
		"  \n\nTimed out after 300s waiting for the pod to be running and ready, the pod is Pending\nnext": "Timed out after 300s waiting for the pod to be running and ready, the pod is Pending",
	} {
		if got := firstLine(in); got != want {
			t.Errorf("firstLine(%q) = %q, want %q", in, got, want)
		}
	}
	long := make([]byte, 500)
	for i := range long {
		long[i] = 'x'
	}
	if got := firstLine(string(long)); len(got) != 240+len("…") {
		t.Errorf("a long line is cut at 240 bytes: got %d", len(got))
	}
}
