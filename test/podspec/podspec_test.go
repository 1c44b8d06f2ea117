// Package podspec keeps docs/podspec.md: what the agent does with every field of a Pod. The table
// is split by area (meta_test.go, pod_test.go, containers_test.go, probes_test.go, security_test.go,
// volumes_test.go); this file walks the Pod API types by reflection and fails when a field is not
// classified (a k8s.io/api bump added one), when a row names a field the API no longer has, or when
// an honoured row names no test or a test that does not exist. cri_test.go, probes_proof_test.go and
// volumes_proof_test.go hold the proofs that were missing elsewhere.
package podspec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type verdict string

const (
	// honoured: the agent applies the field as the kubelet does; the row names the tests proving it.
	honoured verdict = "honoured"
	// refused: a pod (or container) setting the field does not run; the note is what the user sees.
	refused verdict = "refused"
	// notApplicable: the field is not a node's business (the scheduler's, a controller's, the API
	// server's, another OS's); the note says whose.
	notApplicable verdict = "not applicable"
)

// A row classifies one field path, in JSON names: "spec.containers[].securityContext.runAsUser".
// A list of objects is written "name[]"; {a|b} stands for each alternative. A row that is not
// honoured covers everything under its path too (a refused volume kind refuses all its fields); an
// honoured row covers only itself, so a field added under it later must be classified on its own.
type row struct {
	path    string
	verdict verdict
	note    string
	tests   []string // "dir.TestName", dir relative to the repository root
}

// An area is one part of the table and of the doc.
type area struct {
	title string
	intro string
	rows  []row
}

func h(path, note string, tests ...string) row      { return row{path, honoured, note, tests} }
func ref(path, message string, tests ...string) row { return row{path, refused, message, tests} }
func na(path, why string) row                       { return row{path, notApplicable, why, nil} }

// Prefixes shared by the areas.
const (
	anyContainer = "spec.{containers|initContainers|ephemeralContainers}[]"
	appOrInit    = "spec.{containers|initContainers}[]"
)

// areas is the table, in the order of the doc.
func areas() []area {
	return []area{metaArea(), podArea(), schedulingArea(), containersArea(), probesArea(), securityArea(), volumesArea()}
}

// annotationPrefix marks rows for annotations, which no reflection finds: they are checked for
// their tests only.
const annotationPrefix = "metadata.annotations["

// walk lists every field path under t: leaves (values, maps, lists of values) and the objects
// between them.
func walk(t reflect.Type, path string, visit func(path string, leaf bool), seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && isObject(t.Elem()) {
		walk(t.Elem(), path+"[]", visit, seen)
		return
	}
	if !isObject(t) {
		visit(path, true)
		return
	}
	if seen[t] {
		// A type that contains itself would never end; none does today, so it must be classified.
		visit(path, true)
		return
	}
	seen[t] = true
	defer delete(seen, t)
	if path != "" {
		visit(path, false)
	}
	walkFields(t, path, visit, seen)
}

func walkFields(t reflect.Type, path string, visit func(string, bool), seen map[reflect.Type]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("json"), ",")
		if tag[0] == "-" {
			continue
		}
		if f.Anonymous || (len(tag) > 1 && tag[1] == "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			walkFields(ft, path, visit, seen)
			continue
		}
		child := tag[0]
		if path != "" {
			child = path + "." + child
		}
		walk(f.Type, child, visit, seen)
	}
}

var jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

// isObject: a struct users write field by field. Quantities, int-or-strings and times marshal
// themselves and are single values.
func isObject(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && !t.Implements(jsonMarshaler) && !reflect.PointerTo(t).Implements(jsonMarshaler)
}

// podFields are the Pod's field paths: metadata and spec (the status is the agent's to write).
func podFields() map[string]bool {
	out := map[string]bool{}
	visit := func(p string, leaf bool) { out[p] = leaf }
	walk(reflect.TypeOf(metav1.ObjectMeta{}), "metadata", visit, map[reflect.Type]bool{})
	walk(reflect.TypeOf(v1.PodSpec{}), "spec", visit, map[reflect.Type]bool{})
	return out
}

// expand turns {a|b} alternatives, which may nest, into every path they stand for.
func expand(p string) []string {
	i := strings.IndexByte(p, '{')
	if i < 0 {
		return []string{p}
	}
	var alts []string
	depth, from := 0, i+1
	for j := i; j < len(p); j++ {
		switch {
		case p[j] == '{':
			depth++
		case p[j] == '|' && depth == 1:
			alts, from = append(alts, p[from:j]), j+1
		case p[j] == '}':
			if depth--; depth == 0 {
				var out []string
				for _, alt := range append(alts, p[from:j]) {
					out = append(out, expand(p[:i]+alt+p[j+1:])...)
				}
				return out
			}
		}
	}
	return []string{p} // unbalanced: left as is, so the walk reports it as unknown
}

// classified maps each concrete path to its row.
func classified(t *testing.T) map[string]row {
	out := map[string]row{}
	for _, a := range areas() {
		for _, r := range a.rows {
			for _, p := range expand(r.path) {
				if old, ok := out[p]; ok {
					t.Errorf("%s is classified twice: %q and %q", p, old.path, r.path)
				}
				out[p] = r
			}
		}
	}
	return out
}

// coveredBy is the nearest ancestor row that is not honoured, which then classifies p.
func coveredBy(p string, rows map[string]row) (row, bool) {
	for q := parent(p); q != ""; q = parent(q) {
		if r, ok := rows[q]; ok && r.verdict != honoured {
			return r, true
		}
	}
	return row{}, false
}

func parent(p string) string {
	p = strings.TrimSuffix(p, "[]")
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return ""
	}
	return p[:i]
}

// The reflection walk is what keeps the table complete when k8s.io/api is bumped.
func TestEveryPodFieldIsClassified(t *testing.T) {
	fields := podFields()
	rows := classified(t)
	for _, p := range sortedKeys(fields) {
		leaf := fields[p]
		_, own := rows[p]
		anc, covered := coveredBy(p, rows)
		switch {
		case own && covered:
			t.Errorf("%s has a row of its own, but %q (%s) already covers it", p, anc.path, anc.verdict)
		case leaf && !own && !covered:
			t.Errorf("Pod field %s is not classified: honour it (naming the tests), refuse it, or say why it is not a node's", p)
		}
	}
	for _, p := range sortedKeys(rows) {
		r := rows[p]
		if _, ok := fields[p]; !ok && !strings.HasPrefix(p, annotationPrefix) {
			t.Errorf("row %q classifies %s, which the Pod API does not have", r.path, p)
		}
	}
}

// Every row says something, and an honoured row names tests that exist.
func TestRowsNameTheirProof(t *testing.T) {
	tests := testFuncs(t)
	for _, a := range areas() {
		for _, r := range a.rows {
			if strings.TrimSpace(r.note) == "" {
				t.Errorf("%s: no note (what the agent does, the message, or the reason)", r.path)
			}
			if r.verdict == honoured && len(r.tests) == 0 {
				t.Errorf("%s: honoured, but no test proves it", r.path)
			}
			if r.verdict == refused && !strings.Contains(r.note, "\"") && !strings.Contains(r.note, "`") {
				t.Errorf("%s: refused, but the note quotes no message", r.path)
			}
			for _, name := range r.tests {
				dir, fn, ok := cutLast(name, ".")
				if !ok || !strings.HasPrefix(fn, "Test") {
					t.Errorf("%s: test %q is not dir.TestName", r.path, name)
					continue
				}
				if !tests[dir][fn] {
					t.Errorf("%s: no func %s in %s/*_test.go", r.path, fn, dir)
				}
			}
		}
	}
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(`)

// testFuncs are the repository's test functions by folder, whatever their build tags.
func testFuncs(t *testing.T) map[string]map[string]bool {
	root := filepath.Join("..", "..")
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		dir = filepath.ToSlash(dir)
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			if out[dir] == nil {
				out[dir] = map[string]bool{}
			}
			out[dir][string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// docs/podspec.md is rendered from the table; NODELET_UPDATE_DOCS=1 rewrites it.
func TestPodSpecDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "podspec.md")
	want := renderDoc()
	if os.Getenv("NODELET_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date with the table in test/podspec; rerun with NODELET_UPDATE_DOCS=1", path)
	}
}

func renderDoc() string {
	var b strings.Builder
	b.WriteString(`# Pod fields in nodelet

What the agent does with each field of a Pod it runs (k8s.io/api ` + apiVersion() + `), in the JSON names
users write. A field is **honoured** (applied as the kubelet applies it; the tests named prove it),
**refused** (a pod or container setting it does not run, with the message shown), or **not
applicable** (another component's business: the scheduler's, a controller's, the API server's,
another OS's). No field is accepted and ignored.

` + "`{a|b}`" + ` stands for each alternative and ` + "`[]`" + ` for each element of a list. A row that is not honoured
covers every field under it. Static pods (manifest folder or URL) are first validated as the API
server validates a created pod (` + "`agent/podvalidation`" + `); refusals there read
` + "`<path>: <reason>`" + ` and the pod is skipped with that error.

This file is generated from the table in ` + "`test/podspec`" + ` by its test
(` + "`NODELET_UPDATE_DOCS=1 go test ./test/podspec/ -run Doc`" + `); the test also fails when k8s.io/api
gains a field nobody classified, when a row names a field that is gone, and when an honoured row
names no test or one that does not exist.
`)
	count := map[verdict]int{}
	for _, a := range areas() {
		for _, r := range a.rows {
			count[r.verdict]++
		}
	}
	fmt.Fprintf(&b, "\nRows: %d honoured, %d refused, %d not applicable.\n",
		count[honoured], count[refused], count[notApplicable])
	for _, a := range areas() {
		fmt.Fprintf(&b, "\n## %s\n\n", a.title)
		if a.intro != "" {
			b.WriteString(prose(a.intro) + "\n\n")
		}
		b.WriteString("| field | | what nodelet does | tests |\n| --- | --- | --- | --- |\n")
		for _, r := range a.rows {
			tests := make([]string, len(r.tests))
			for i, name := range r.tests {
				tests[i] = "`" + name + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", cell(r.path), r.verdict, cell(prose(r.note)), strings.Join(tests, ", "))
		}
	}
	return b.String()
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// prose escapes what Markdown would take for HTML tags (<name>) outside code spans.
func prose(s string) string {
	parts := strings.Split(s, "`")
	for i := 0; i < len(parts); i += 2 {
		parts[i] = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(parts[i])
	}
	return strings.Join(parts, "`")
}

// apiVersion is the k8s.io/api version of go.mod, for the doc's header.
func apiVersion() string {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		return "(go.mod unreadable)"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/api" {
			return f[1]
		}
	}
	return "(not in go.mod)"
}

// sortedKeys is for stable error output in the tests.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
