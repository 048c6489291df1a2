// SPDX-License-Identifier: BSD-3-Clause

package abicheck

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	headerPath = "../../include/cucopy.h"
	coreDir    = "../../core"
)

// headerStatuses reads the members of cucopy_status_t: name -> value. The
// header pins every value explicitly; a member without one is an error.
func headerStatuses(t *testing.T) map[string]int64 {
	t.Helper()
	src, err := os.ReadFile(headerPath)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`).ReplaceAllString(string(src), " ")
	m := regexp.MustCompile(`(?s)typedef\s+enum\s+cucopy_status\s*\{([^}]*)\}\s*cucopy_status_t\s*;`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s: no `typedef enum cucopy_status { ... } cucopy_status_t;`", headerPath)
	}
	member := regexp.MustCompile(`^([A-Z][A-Z0-9_]*)\s*=\s*(-?\s*[0-9]+)$`)
	out := map[string]int64{}
	for _, item := range strings.Split(m[1], ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		mm := member.FindStringSubmatch(item)
		if mm == nil {
			t.Fatalf("%s: cucopy_status_t member %q: want NAME = <integer>", headerPath, item)
		}
		v, err := strconv.ParseInt(strings.ReplaceAll(mm[2], " ", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[mm[1]] = v
	}
	if len(out) == 0 {
		t.Fatalf("%s: cucopy_status_t has no members", headerPath)
	}
	return out
}

// goStatuses reads package core's constants of type Status: name -> value.
// It type-checks only the `type Status` declaration and the const blocks
// that declare Status constants (found in any non-test file of core), so
// iota and constant expressions evaluate as the compiler would.
func goStatuses(t *testing.T) map[string]int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(coreDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	synth := &ast.File{Name: ast.NewIdent("core")}
	haveType := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				for _, spec := range gd.Specs {
					if ts := spec.(*ast.TypeSpec); ts.Name.Name == "Status" {
						synth.Decls = append(synth.Decls, &ast.GenDecl{Tok: token.TYPE, Specs: []ast.Spec{ts}})
						haveType = true
					}
				}
			case token.CONST:
				for _, spec := range gd.Specs {
					if id, ok := spec.(*ast.ValueSpec).Type.(*ast.Ident); ok && id.Name == "Status" {
						synth.Decls = append(synth.Decls, gd)
						break
					}
				}
			}
		}
	}
	if !haveType {
		t.Fatalf("%s: no `type Status`", coreDir)
	}
	pkg, err := (&types.Config{}).Check("core", fset, []*ast.File{synth}, nil)
	if err != nil {
		t.Fatalf("type-checking core's Status constants on their own: %v "+
			"(keep the block of Status constants self-contained)", err)
	}
	status := pkg.Scope().Lookup("Status").Type()
	out := map[string]int64{}
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || !types.Identical(c.Type(), status) {
			continue
		}
		v, exact := constant.Int64Val(c.Val())
		if !exact {
			t.Fatalf("core.%s = %v is not an int64", name, c.Val())
		}
		out[name] = v
	}
	return out
}

// TestStatusesMatchHeader: every status of include/cucopy.h has a core
// constant of the same value, and core has no status the header lacks. (The
// other copies: cucopy_status_string's switch in capi/wrappers.c fails to
// compile without a case per member (-Werror=switch); include/cucopy.f90 is
// compared by tests/fortran's check_module tests.)
func TestStatusesMatchHeader(t *testing.T) {
	h := headerStatuses(t)
	g := goStatuses(t)
	byValue := map[int64][]string{}
	for name, v := range g {
		byValue[v] = append(byValue[v], name)
	}
	for name, v := range h {
		if len(byValue[v]) == 0 {
			t.Errorf("include/cucopy.h: %s = %d has no core.Status constant of that value: "+
				"add one to core/status.go and assert it in capi/abi.go", name, v)
		}
	}
	inHeader := map[int64]bool{}
	for _, v := range h {
		inHeader[v] = true
	}
	for name, v := range g {
		if !inHeader[v] {
			t.Errorf("core.%s = %d is not a member of cucopy_status_t in include/cucopy.h", name, v)
		}
	}
	if !t.Failed() {
		t.Logf("%d statuses: header == core", len(h))
	}
}
