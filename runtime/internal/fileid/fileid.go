// Package fileid checks the IDs the runtime turns into file names (sandbox and container IDs
// under its state and root dirs, and in libcni's cache).
package fileid

// Valid reports whether id is 1–128 characters of [A-Za-z0-9_.-] starting with a letter or
// digit: never "", ".", "..", a path or a NUL. A loop rather than a regexp: the {0,127}
// repetition compiles into 118 KB of program at start, in every mode of the binary.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}
