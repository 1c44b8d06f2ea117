// Command e2ereport summarises a ginkgo JSON report of hack/conformance.sh:
//
//	go run ./hack/kube/e2ereport [--focus REGEX] [--skip REGEX] report.json
//
// It prints `conformance: N passed, N failed, N skipped` over the specs the run selected, then
// each failed spec with the first line of its failure, then the reasons the suite gave for the
// specs it skipped itself, and exits 1 when one failed or when the run selected no spec at all.
// Specs that --focus does not match, or --skip does, were filtered out by ginkgo and are not
// counted; a selected spec the suite skipped itself (a missing feature it checks for) counts as
// skipped.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The parts of ginkgo's types.Report that the summary needs.
type report struct {
	SuiteDescription string
	SpecReports      []specReport
}

type specReport struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	RunTime                 time.Duration
	Failure                 struct{ Message string }
}

func (s specReport) fullText() string {
	return strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
}

func main() {
	focus := flag.String("focus", "", "count only specs whose full text matches")
	skip := flag.String("skip", "", "do not count specs whose full text matches")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: e2ereport [--focus REGEX] [--skip REGEX] report.json")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *focus, *skip); err != nil {
		fmt.Fprintln(os.Stderr, "e2ereport:", err)
		os.Exit(2)
	}
}

func run(path, focus, skip string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var reports []report
	if err := json.Unmarshal(b, &reports); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var focusRE, skipRE *regexp.Regexp
	if focus != "" {
		if focusRE, err = regexp.Compile(focus); err != nil {
			return fmt.Errorf("--focus: %w", err)
		}
	}
	if skip != "" {
		if skipRE, err = regexp.Compile(skip); err != nil {
			return fmt.Errorf("--skip: %w", err)
		}
	}
	sum := summarise(reports, focusRE, skipRE)
	if sum.passed+len(sum.failed)+sum.skipped == 0 {
		return errors.New("the run selected no spec: check --focus and --skip")
	}
	fmt.Printf("conformance: %d passed, %d failed, %d skipped\n", sum.passed, len(sum.failed), sum.skipped)
	for _, s := range sum.failed {
		fmt.Printf("  FAIL (%s) %s\n       %s\n", s.State, s.fullText(), firstLine(s.Failure.Message))
	}
	for _, s := range sum.slowest {
		fmt.Printf("  slowest: %5.1f s %s\n", s.RunTime.Seconds(), s.fullText())
	}
	if len(sum.skipReasons) > 0 {
		fmt.Println("  skipped by the suite itself, by reason:")
	}
	for _, r := range sum.skipReasons {
		fmt.Printf("  %4d × %s\n", r.count, r.reason)
	}
	if len(sum.failed) > 0 {
		os.Exit(1)
	}
	return nil
}

type summary struct {
	passed, skipped int
	failed          []specReport
	slowest         []specReport // the five longest passed specs, longest first
	skipReasons     []skipReason // why the suite skipped selected specs, most frequent first
}

type skipReason struct {
	reason string
	count  int
}

// summarise counts the It specs the run selected: ginkgo reports every spec of the suite, those
// its --focus/--skip filtered out as skipped too, so the same filters are applied here; set-up and
// report nodes are left out (a failure there fails the run through ginkgo's exit code).
func summarise(reports []report, focusRE, skipRE *regexp.Regexp) summary {
	var sum summary
	reasons := map[string]int{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "It" {
				continue
			}
			text := r.SuiteDescription + " " + s.fullText()
			if (focusRE != nil && !focusRE.MatchString(text)) || (skipRE != nil && skipRE.MatchString(text)) {
				continue
			}
			switch s.State {
			case "passed":
				sum.passed++
				sum.slowest = append(sum.slowest, s)
			case "skipped", "pending":
				sum.skipped++
				reasons[firstLine(s.Failure.Message)]++
			default: // failed, panicked, timedout, interrupted, aborted
				sum.failed = append(sum.failed, s)
			}
		}
	}
	sort.SliceStable(sum.slowest, func(i, j int) bool { return sum.slowest[i].RunTime > sum.slowest[j].RunTime })
	if len(sum.slowest) > 5 {
		sum.slowest = sum.slowest[:5]
	}
	for reason, n := range reasons {
		if reason == "" {
			reason = "(no reason given)"
		}
		sum.skipReasons = append(sum.skipReasons, skipReason{reason, n})
	}
	sort.Slice(sum.skipReasons, func(i, j int) bool {
		a, b := sum.skipReasons[i], sum.skipReasons[j]
		return a.count > b.count || (a.count == b.count && a.reason < b.reason)
	})
	return sum
}

// firstLine is the gist of a failure message: its first line, with the next ones while it is as
// short as gomega's "Expected" headers, at most 240 bytes.
func firstLine(msg string) string {
	var out string
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if out != "" {
			out += " "
		}
		out += l
		if len(out) >= 40 {
			break
		}
	}
	if len(out) > 240 {
		out = out[:240] + "…"
	}
	return out
}
