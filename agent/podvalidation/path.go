package podvalidation

import (
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateLocalDescendingPath refuses a path that is absolute or steps up: it is joined under a
// directory the agent owns (a subPath, a projected file), and must stay inside it.
func validateLocalDescendingPath(p string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) || strings.HasPrefix(p, `\`) {
		errs = append(errs, field.Invalid(fld, p, "must be a relative path"))
	}
	errs = append(errs, validatePathNoBacksteps(p, fld)...)
	return errs
}

// validatePathNoBacksteps refuses a '..' element (with either separator) and a NUL byte, which no
// path the kernel accepts may hold.
func validatePathNoBacksteps(p string, fld *field.Path) field.ErrorList {
	if strings.IndexByte(p, 0) >= 0 {
		return field.ErrorList{field.Invalid(fld, p, "must not contain a NUL byte")}
	}
	for _, elem := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if elem == ".." {
			return field.ErrorList{field.Invalid(fld, p, "must not contain '..'")}
		}
	}
	return nil
}
