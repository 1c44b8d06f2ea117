// Command pages tells which Go packages a running process has paged in from its own binary.
//
// Most of an idle nodelet's RSS is the binary itself: pages of text, rodata and pclntab that some
// init function, type registration or stack scan touched once and that stay mapped. RssFile says
// how much, not whose. This reads the process's page tables (/proc/PID/maps and /proc/PID/pagemap,
// root only) for the mappings of its executable and charges every present page to the symbols
// that lie on it, then sums per package. The pclntab and the funcdata blob (go:func.*) carry no
// per-function symbols, so their pages are charged through the function table: each function's
// _func record, name, pc tables and funcdata are located and owned by that function's package.
//
//	go run ./bench/pages -pid $(pgrep -n nodelet) [-top 15] [-depth 0] [-sections]
//
// -depth N groups packages by their first N path elements (k8s.io/client-go/kubernetes/typed/…
// folds into k8s.io/client-go/kubernetes at -depth 3). Pages written since start (.data, .bss
// after copy-on-write) show as anonymous; the Go heap is not in the binary and is not counted here.
package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const pageSize = 4096

type span struct {
	lo, hi uint64 // virtual addresses of the ELF image, [lo, hi)
	owner  string
	name   string // the symbol, or what part of which function's metadata
}

func main() {
	pid := flag.Int("pid", 0, "process to inspect")
	top := flag.Int("top", 15, "packages to list")
	depth := flag.Int("depth", 0, "group packages by this many leading path elements (0: whole path)")
	sections := flag.Bool("sections", false, "also print resident KB per ELF section")
	symbols := flag.String("symbols", "", "also list the resident symbols of packages with this import path prefix")
	flag.Parse()
	if *pid == 0 {
		fmt.Fprintln(os.Stderr, "usage: pages -pid PID [-top N] [-depth N] [-sections]")
		os.Exit(2)
	}
	if err := run(*pid, *top, *depth, *sections, *symbols); err != nil {
		fmt.Fprintln(os.Stderr, "pages:", err)
		os.Exit(1)
	}
}

func run(pid, top, depth int, showSections bool, symbolPrefix string) error {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return err
	}
	// Read the binary through the process, so a rebuilt file on disk cannot mislead.
	f, err := elf.Open(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return err
	}
	defer f.Close()

	spans, err := symbolSpans(f)
	if err != nil {
		return err
	}
	present, err := presentPages(pid, exe, f)
	if err != nil {
		return err
	}

	type tally struct{ file, anon float64 }
	byPkg := map[string]*tally{}
	bySym := map[string]*tally{}
	bySection := map[string]*tally{}
	var total tally
	for _, pg := range present {
		add := func(m map[string]*tally, k string, bytes float64) {
			t := m[k]
			if t == nil {
				t = &tally{}
				m[k] = t
			}
			if pg.file {
				t.file += bytes
			} else {
				t.anon += bytes
			}
		}
		if pg.file {
			total.file += pageSize
		} else {
			total.anon += pageSize
		}
		sec := "(no section)"
		for _, s := range f.Sections {
			if s.Addr <= pg.addr && pg.addr < s.Addr+s.Size && s.Flags&elf.SHF_ALLOC != 0 {
				sec = s.Name
				break
			}
		}
		add(bySection, sec, pageSize)
		lo, hi := pg.addr, pg.addr+pageSize
		covered := uint64(0)
		i := sort.Search(len(spans), func(i int) bool { return spans[i].hi > lo })
		for ; i < len(spans) && spans[i].lo < hi; i++ {
			a, b := max(lo, spans[i].lo), min(hi, spans[i].hi)
			if b <= a {
				continue
			}
			add(byPkg, group(spans[i].owner, depth), float64(b-a))
			if symbolPrefix != "" && strings.HasPrefix(spans[i].owner, symbolPrefix) {
				add(bySym, spans[i].name, float64(b-a))
			}
			covered += b - a
		}
		if covered < pageSize {
			add(byPkg, "("+sec+", unattributed)", float64(pageSize-covered))
		}
	}

	fmt.Printf("%s pid %d: %d KB of its binary resident (%d KB file-backed, %d KB copied on write)\n",
		filepath.Base(exe), pid, int(total.file+total.anon)/1024, int(total.file)/1024, int(total.anon)/1024)
	printTop := func(title string, m map[string]*tally, n int) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := m[keys[i]], m[keys[j]]
			if a.file+a.anon != b.file+b.anon {
				return a.file+a.anon > b.file+b.anon
			}
			return keys[i] < keys[j]
		})
		fmt.Printf("\n%-8s %-8s %-8s %s\n", "KB", "file", "anon", title)
		var rest tally
		for i, k := range keys {
			t := m[k]
			if n > 0 && i >= n {
				rest.file += t.file
				rest.anon += t.anon
				continue
			}
			fmt.Printf("%-8.0f %-8.0f %-8.0f %s\n", (t.file+t.anon)/1024, t.file/1024, t.anon/1024, k)
		}
		if rest.file+rest.anon > 0 {
			fmt.Printf("%-8.0f %-8.0f %-8.0f (%d more)\n", (rest.file+rest.anon)/1024, rest.file/1024, rest.anon/1024, len(keys)-n)
		}
	}
	printTop("package", byPkg, top)
	if showSections {
		printTop("section", bySection, 0)
	}
	if symbolPrefix != "" {
		printTop("symbol of "+symbolPrefix+"…", bySym, 40)
	}
	return nil
}

type page struct {
	addr uint64 // ELF virtual address of the page
	file bool   // still the file's page (not copied on write)
}

// presentPages lists the pages of the executable's mappings that are in the process's page
// tables — what RssFile and the binary's share of RssAnon count.
func presentPages(pid int, exe string, f *elf.File) ([]page, error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer maps.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pm.Close()

	var out []page
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		var start, end, off uint64
		if _, err := fmt.Sscanf(fields[0], "%x-%x", &start, &end); err != nil {
			return nil, err
		}
		if off, err = strconv.ParseUint(fields[2], 16, 64); err != nil {
			return nil, err
		}
		n := (end - start) / pageSize
		buf := make([]byte, 8*n)
		if _, err := pm.ReadAt(buf, int64(start/pageSize*8)); err != nil {
			return nil, fmt.Errorf("pagemap: %w", err)
		}
		for i := uint64(0); i < n; i++ {
			e := binary.LittleEndian.Uint64(buf[8*i:])
			if e&(1<<63) == 0 {
				continue
			}
			vaddr, ok := fileToVaddr(f, off+i*pageSize)
			if !ok {
				continue
			}
			out = append(out, page{addr: vaddr, file: e&(1<<61) != 0})
		}
	}
	return out, sc.Err()
}

// symbolPackage extracts the import path from a Go symbol name such as
// "k8s.io/api/core/v1.(*Pod).Marshal", "type:*k8s.io/api/core/v1.Pod" or
// "go:itab.*k8s.io/x.T,k8s.io/y.I" (charged to the concrete type's package).
func symbolPackage(name string) string {
	for _, p := range []string{"go:itab.", "type:.eq.", "type:.hash.", "type:", "go:string.", "go:"} {
		if strings.HasPrefix(name, p) {
			name = name[len(p):]
			if p == "go:" || p == "go:string." {
				return "(go:" + strings.SplitN(name, ".", 2)[0] + ")"
			}
			break
		}
	}
	name = strings.TrimLeft(name, "*[]0123456789")
	for _, p := range []string{"map[", "func(", "struct {", "interface {", "chan "} {
		if strings.HasPrefix(name, p) {
			return "(type literals)"
		}
	}
	slash := strings.LastIndexByte(name, '/')
	if slash < 0 {
		slash = 0
	}
	if dot := strings.IndexByte(name[slash:], '.'); dot >= 0 {
		return name[:slash+dot]
	}
	if name == "" {
		return "(anonymous)"
	}
	return name
}

func group(pkg string, depth int) string {
	if depth <= 0 || strings.HasPrefix(pkg, "(") {
		return pkg
	}
	parts := strings.Split(pkg, "/")
	if len(parts) > depth {
		parts = parts[:depth]
	}
	return strings.Join(parts, "/")
}
