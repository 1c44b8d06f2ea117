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

// fileToVaddr turns a file offset into the address the ELF image gives it (so PIE builds and
// ASLR do not matter).
func fileToVaddr(f *elf.File, off uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= off && off < p.Off+p.Filesz {
			return p.Vaddr + off - p.Off, true
		}
	}
	return 0, false
}

// symbolSpans returns every address range of the image that can be charged to a function or
// type, sorted: ELF symbols with a size, plus the pclntab and funcdata pieces of every function.
func symbolSpans(f *elf.File) ([]span, error) {
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	var spans []span
	var gofunc, types, typesEnd uint64
	for _, s := range syms {
		switch s.Name {
		case "go:func.*":
			gofunc = s.Value
		case "runtime.types":
			types = s.Value
		case "go:string.*": // the linker places the strings right after the types
			typesEnd = s.Value
		}
		// Containers of many functions' data are split below instead.
		if s.Size == 0 || s.Name == "runtime.pclntab" || s.Name == "go:func.*" || s.Name == "runtime.functab" ||
			s.Name == "runtime.pctab" || s.Name == "runtime.funcnametab" || s.Name == "runtime.filetab" || s.Name == "runtime.cutab" {
			continue
		}
		spans = append(spans, span{s.Value, s.Value + s.Size, symbolPackage(s.Name), s.Name})
	}
	if types != 0 && typesEnd > types {
		spans = append(spans, typeSpans(f, types, typesEnd)...)
	}
	if pcl := f.Section(".gopclntab"); pcl != nil {
		more, err := pclntabSpans(pcl, gofunc)
		if err != nil {
			return nil, fmt.Errorf("pclntab: %w", err)
		}
		spans = append(spans, more...)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	// Overlaps (aliases, the pieces above against leftover symbols) would count a byte twice.
	out := spans[:0]
	var end uint64
	for _, s := range spans {
		if s.lo < end {
			s.lo = end
		}
		if s.hi <= s.lo {
			continue
		}
		out = append(out, s)
		end = s.hi
	}
	return out, nil
}

// pclntabSpans follows the runtime's layout of the function table (runtime/symtab.go,
// pcHeader and _func, Go 1.20+): each function's _func record with its pcdata and funcdata
// offsets, its name in funcnametab, its pc-value tables in pctab and its funcdata in go:func.*.
// Tables shared between functions go to the first function that points at them; a table's end
// is taken as the next table's start.
func pclntabSpans(sec *elf.Section, gofunc uint64) ([]span, error) {
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if len(data) < 72 || data[7] != 8 {
		return nil, fmt.Errorf("unexpected header")
	}
	nfunc := le.Uint64(data[8:])
	funcname := le.Uint64(data[32:])
	pctab := le.Uint64(data[56:])
	pcln := le.Uint64(data[64:])
	base := sec.Addr

	var spans []span
	type start struct {
		off         uint64
		owner, name string
	}
	var pcStarts, fdStarts []start
	var nameStarts []start
	ftab := data[pcln:]
	for i := uint64(0); i < nfunc; i++ {
		funcOff := uint64(le.Uint32(ftab[8*i+4:]))
		fn := ftab[funcOff:]
		nameOff := uint64(le.Uint32(fn[4:]))
		nameAt := funcname + nameOff
		nameEnd := nameAt
		for nameEnd < uint64(len(data)) && data[nameEnd] != 0 {
			nameEnd++
		}
		fname := string(data[nameAt:nameEnd])
		owner := symbolPackage(fname)
		nameStarts = append(nameStarts, start{nameAt, owner, "name of " + fname})
		npcdata := uint64(le.Uint32(fn[28:]))
		nfuncdata := uint64(fn[43])
		recLen := 44 + 4*npcdata + 4*nfuncdata
		spans = append(spans, span{base + pcln + funcOff, base + pcln + funcOff + recLen, owner, "_func of " + fname})
		for _, o := range []uint32{le.Uint32(fn[16:]), le.Uint32(fn[20:]), le.Uint32(fn[24:])} {
			if o != 0 {
				pcStarts = append(pcStarts, start{pctab + uint64(o), owner, "pc tables of " + fname})
			}
		}
		for k := uint64(0); k < npcdata; k++ {
			if o := le.Uint32(fn[44+4*k:]); o != 0 {
				pcStarts = append(pcStarts, start{pctab + uint64(o), owner, "pc tables of " + fname})
			}
		}
		for k := uint64(0); k < nfuncdata; k++ {
			if o := le.Uint32(fn[44+4*npcdata+4*k:]); o != ^uint32(0) && gofunc != 0 {
				fdStarts = append(fdStarts, start{uint64(o), owner, "funcdata of " + fname})
			}
		}
	}
	// The function table itself: 8 bytes per function, in text order.
	for i := uint64(0); i < nfunc; i++ {
		funcOff := uint64(le.Uint32(ftab[8*i+4:]))
		fn := ftab[funcOff:]
		nameOff := uint64(le.Uint32(fn[4:]))
		nameAt := funcname + nameOff
		nameEnd := nameAt
		for data[nameEnd] != 0 {
			nameEnd++
		}
		fname := string(data[nameAt:nameEnd])
		spans = append(spans, span{base + pcln + 8*i, base + pcln + 8*i + 8, symbolPackage(fname), "functab entry of " + fname})
	}
	ranges := func(starts []start, origin, limit uint64) {
		sort.SliceStable(starts, func(i, j int) bool { return starts[i].off < starts[j].off })
		for i, s := range starts {
			if i > 0 && starts[i-1].off == s.off {
				continue
			}
			end := limit
			for j := i + 1; j < len(starts); j++ {
				if starts[j].off > s.off {
					end = starts[j].off
					break
				}
			}
			spans = append(spans, span{origin + s.off, origin + end, s.owner, s.name})
		}
	}
	ranges(nameStarts, base, funcname+uint64(len(data[funcname:])))
	ranges(pcStarts, base, pcln)
	if gofunc != 0 {
		// go:func.* ends where rodata's next symbol starts; cap each piece to keep the last sane.
		last := uint64(0)
		for _, s := range fdStarts {
			last = max(last, s.off)
		}
		ranges(fdStarts, gofunc, last+64)
	}
	// funcnametab's end is the cutab; clip names so they do not swallow it.
	cu := le.Uint64(data[40:])
	for i := range spans {
		if spans[i].lo >= base+funcname && spans[i].lo < base+cu && spans[i].hi > base+cu {
			spans[i].hi = base + cu
		}
	}
	return spans, nil
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

// typeSpans charges the type descriptors, which the linker keeps out of the symbol table, to
// the package that declares each type. Starting from the typelinks and the itabs it walks every
// descriptor the runtime can reach (internal/abi's layout, 64-bit) and gives each the bytes up
// to the next descriptor, which takes in its uncommon part, methods and the names placed after.
func typeSpans(f *elf.File, types, end uint64) []span {
	read := func(addr, n uint64) []byte {
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Vaddr <= addr && addr+n <= p.Vaddr+p.Filesz {
				b := make([]byte, n)
				if _, err := p.ReadAt(b, int64(addr-p.Vaddr)); err != nil {
					return nil
				}
				return b
			}
		}
		return nil
	}
	le := binary.LittleEndian
	u64 := func(a uint64) uint64 {
		if b := read(a, 8); b != nil {
			return le.Uint64(b)
		}
		return 0
	}
	u32 := func(a uint64) uint32 {
		if b := read(a, 4); b != nil {
			return le.Uint32(b)
		}
		return 0
	}
	name := func(a uint64) string { // an abi.Name: flags byte, uvarint length, bytes
		b := read(a, 1+binary.MaxVarintLen64)
		if b == nil {
			return ""
		}
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > 1<<16 {
			return ""
		}
		if s := read(a+1+uint64(k), n); s != nil {
			return string(s)
		}
		return ""
	}
	owner := map[uint64]string{}
	typeName := map[uint64]string{}
	var queue []uint64
	push := func(t uint64) {
		if t == 0 {
			return
		}
		if _, seen := owner[t]; !seen {
			owner[t] = ""
			queue = append(queue, t)
		}
	}
	if sec := f.Section(".typelink"); sec != nil {
		if b, err := sec.Data(); err == nil {
			for i := 0; i+4 <= len(b); i += 4 {
				push(types + uint64(int32(le.Uint32(b[i:]))))
			}
		}
	}
	if sec := f.Section(".itablink"); sec != nil {
		if b, err := sec.Data(); err == nil {
			for i := 0; i+8 <= len(b); i += 8 {
				itab := le.Uint64(b[i:])
				push(u64(itab))     // Inter
				push(u64(itab + 8)) // Type
			}
		}
	}
	elemOf := map[uint64]uint64{}
	for len(queue) > 0 {
		t := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		hdr := read(t, 48)
		if hdr == nil {
			delete(owner, t)
			continue
		}
		tflag, kind := hdr[20], hdr[23]&31
		typeName[t] = name(types + uint64(int32(le.Uint32(hdr[40:]))))
		if pto := int32(le.Uint32(hdr[44:])); pto > 0 {
			push(types + uint64(pto))
		}
		extra := uint64(0)
		switch kind {
		case 17: // array
			push(u64(t + 48))
			push(u64(t + 56))
			elemOf[t] = u64(t + 48)
			extra = 24
		case 18, 22, 23: // chan, pointer, slice
			push(u64(t + 48))
			elemOf[t] = u64(t + 48)
			extra = 8 + map[byte]uint64{18: 8}[kind]
		case 19: // func
			extra = 8
		case 20: // interface
			ms, n := u64(t+56), u64(t+64)
			for i := uint64(0); i < n && i < 1<<12; i++ {
				if to := int32(u32(ms + 8*i + 4)); to > 0 {
					push(types + uint64(to))
				}
			}
			extra = 32
		case 21: // map
			push(u64(t + 48))
			push(u64(t + 56))
			push(u64(t + 64))
			elemOf[t] = u64(t + 56)
			extra = 64
		case 25: // struct
			fs, n := u64(t+56), u64(t+64)
			for i := uint64(0); i < n && i < 1<<14; i++ {
				push(u64(fs + 24*i + 8))
			}
			extra = 32
		}
		if kind == 19 {
			in, out := uint64(le.Uint16(read(t+48, 2))), uint64(le.Uint16(read(t+50, 2))&0x7fff)
			params := t + 56
			if tflag&1 != 0 {
				params += 16
			}
			for i := uint64(0); i < in+out && i < 1<<10; i++ {
				push(u64(params + 8*i))
			}
		}
		if tflag&1 != 0 { // uncommon: package path and methods
			un := t + 48 + extra
			if p := int32(u32(un)); p != 0 {
				owner[t] = name(types + uint64(p))
			}
			mcount, moff := uint64(le.Uint16(read(un+4, 2))), uint64(u32(un+8))
			for i := uint64(0); i < mcount && i < 1<<12; i++ {
				if mt := int32(u32(un + moff + 16*i + 4)); mt > 0 {
					push(types + uint64(mt))
				}
			}
		}
		if owner[t] == "" && tflag&4 != 0 { // a named type without methods: the string is pkg.Name
			s := strings.TrimPrefix(name(types+uint64(int32(le.Uint32(hdr[40:])))), "*")
			if tflag&2 != 0 {
				s = strings.TrimPrefix(s, "*")
			}
			if i := strings.IndexByte(s, '.'); i > 0 {
				owner[t] = "(types of package " + s[:i] + ")"
			}
		}
	}
	// Unnamed types belong to what they are made of.
	var resolve func(t uint64, depth int) string
	resolve = func(t uint64, depth int) string {
		if o := owner[t]; o != "" || depth > 8 {
			return o
		}
		if e, ok := elemOf[t]; ok {
			return resolve(e, depth+1)
		}
		return ""
	}
	starts := make([]uint64, 0, len(owner))
	for t := range owner {
		starts = append(starts, t)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	var spans []span
	for i, t := range starts {
		hi := end
		if i+1 < len(starts) {
			hi = starts[i+1]
		}
		o := resolve(t, 0)
		if o == "" {
			o = "(type literals)"
		}
		spans = append(spans, span{t, hi, o, "type descriptor " + typeName[t]})
	}
	return spans
}
