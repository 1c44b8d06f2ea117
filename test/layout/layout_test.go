// Package layout checks that docs/layout.md, the map a newcomer reads first, names every package
// of the module and no package that is gone.
package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const root = "../.."

// packages are the module's directories holding Go files, as go list sees them: directories
// named testdata or starting with _ or . are not packages.
func packages(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type section struct {
	prefix string          // the folder the section's heading names, "" for the rest
	named  map[string]bool // every backquoted token in the section
	rows   []string        // backquoted tokens of the first column of its package tables
}

var (
	heading = regexp.MustCompile("^## (?:.*?\\(`([^`]+)/`\\))?")
	quoted  = regexp.MustCompile("`([^`]+)`")
)

// sections splits the document at its second-level headings. A heading such as
// "## The agent (`agent/`)" makes the names in its tables relative to agent/.
func sections(t *testing.T) []section {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []section
	cur := section{named: map[string]bool{}}
	inMap := false
	for _, line := range strings.Split(string(b), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			out = append(out, cur)
			cur = section{prefix: m[1], named: map[string]bool{}}
			if m[1] != "" {
				cur.named[""] = true // the section's own folder is its heading's
			}
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(line, -1) {
			cur.named[strings.TrimSuffix(m[1], "/")] = true
		}
		// Only the map's own tables (headed "| package | job |") have one package per row; other
		// tables, such as figures, may name packages that are gone.
		if !strings.HasPrefix(line, "|") {
			inMap = false
		}
		if strings.HasPrefix(line, "| package | job |") {
			inMap = true
			continue
		}
		if inMap && !strings.HasPrefix(line, "| ---") {
			first := strings.SplitN(line[2:], " | ", 2)[0]
			for _, m := range quoted.FindAllStringSubmatch(first, -1) {
				cur.rows = append(cur.rows, strings.TrimSuffix(m[1], "/"))
			}
		}
	}
	return append(out, cur)
}

func join(prefix, name string) string {
	if name == "" {
		return prefix
	}
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

func TestLayoutNamesEveryPackage(t *testing.T) {
	secs := sections(t)
	var missing []string
	for pkg := range packages(t) {
		found := false
		for _, s := range secs {
			if s.prefix != "" && pkg != s.prefix && !strings.HasPrefix(pkg, s.prefix+"/") {
				continue
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(pkg, s.prefix), "/")
			if s.named[rel] {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, pkg)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/layout.md does not name these packages (a table row in their half's section, or a backquoted path under \"Around them\"):\n  %s", strings.Join(missing, "\n  "))
	}
}

func TestLayoutNamesNoPackageThatIsGone(t *testing.T) {
	pkgs := packages(t)
	for _, s := range sections(t) {
		for _, name := range s.rows {
			if strings.HasSuffix(name, ".go") {
				continue
			}
			if p := join(s.prefix, name); !pkgs[p] {
				t.Errorf("docs/layout.md has a row for %s, which is no package of the module", p)
			}
		}
	}
}
