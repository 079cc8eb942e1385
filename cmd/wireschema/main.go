// Command wireschema writes core/wire's request schema (schema_gen.go): the
// wire layout of every Kafka request kmsg decodes, by version, so that
// core/wire can walk a request body and count its topics, partitions,
// array entries and tagged fields before kmsg decodes it (SPEC.md §7.3).
//
// The layout comes from the protocol definitions kmsg itself is generated
// from (github.com/twmb/franz-go's generate/definitions, in the module
// version go.mod requires), so that the schema and kmsg's decoder agree;
// core/wire's TestScanAgreesWithKmsg checks that they do for every request
// and version. Run it from the repository root:
//
//	go run ./cmd/wireschema
//
// It reads only request definitions and the named structures and enums
// they use; a construct a request uses that it does not know stops it with
// an error naming the line.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	definitions := flag.String("definitions", "", "franz-go's generate/definitions directory (default: the one of the franz-go module go.mod requires)")
	out := flag.String("out", "core/wire/schema_gen.go", "file to write")
	flag.Parse()
	if err := run(*definitions, *out); err != nil {
		fmt.Fprintln(os.Stderr, "wireschema:", err)
		os.Exit(1)
	}
}

func run(definitions, out string) error {
	version := ""
	if definitions == "" {
		dir, v, err := franzGoModule()
		if err != nil {
			return err
		}
		definitions, version = filepath.Join(dir, "generate", "definitions"), v
	}
	defs, err := parseDefinitions(definitions)
	if err != nil {
		return err
	}
	src, err := defs.render(version)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// franzGoModule finds the franz-go module directory and version go.mod
// requires.
func franzGoModule() (dir, version string, err error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/twmb/franz-go")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outBytes, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go list franz-go: %w: %s", err, stderr.String())
	}
	fields := strings.Fields(string(outBytes))
	if len(fields) != 2 || fields[0] == "" {
		return "", "", fmt.Errorf("go list franz-go printed %q; is the module downloaded (go mod download github.com/twmb/franz-go)?", outBytes)
	}
	return fields[0], fields[1], nil
}

// kind is a field's wire type, as core/wire's scanner knows it.
type kind string

const (
	kindInt8        kind = "kindInt8"
	kindInt16       kind = "kindInt16"
	kindInt32       kind = "kindInt32"
	kindInt64       kind = "kindInt64"
	kindUUID        kind = "kindUUID"
	kindVarint      kind = "kindVarint"
	kindVarlong     kind = "kindVarlong"
	kindString      kind = "kindString"
	kindBytes       kind = "kindBytes"
	kindVarintBytes kind = "kindVarintBytes"
	kindStruct      kind = "kindStruct"
	kindNullStruct  kind = "kindNullableStruct"
	kindArray       kind = "kindArray"
)

var primitives = map[string]kind{
	"bool": kindInt8, "int8": kindInt8, "int16": kindInt16, "uint16": kindInt16,
	"int32": kindInt32, "uint32": kindInt32, "int64": kindInt64, "float64": kindInt64,
	"uuid": kindUUID, "varint": kindVarint, "varlong": kindVarlong,
	"string": kindString, "nullable-string": kindString, "varint-string": kindVarintBytes,
	"bytes": kindBytes, "nullable-bytes": kindBytes, "varint-bytes": kindVarintBytes,
}

// field is one field of a structure.
type field struct {
	name       string
	kind       kind
	versionMin int
	versionMax int // -1: no upper bound
	tag        int // -1: not tagged
	// elem is an array's element kind; body is the structure of a struct
	// field or of a struct array's elements.
	elem kind
	body *structDef
	// ref names a named structure not yet resolved.
	ref string
	// unsupported says why the scanner could not walk this field; it is
	// an error only if a request reaches the field.
	unsupported string
	line        string
}

// structDef is a structure: a request, a named structure, or an anonymous
// one inside either.
type structDef struct {
	name   string
	fields []*field
}

// request is a top-level request definition.
type request struct {
	key, maxVersion, flexibleMin int // flexibleMin -1: never flexible
	body                         *structDef
}

type definitions struct {
	requests map[int]*request
	named    map[string]*structDef
	enums    map[string]kind
}

var (
	topLevelLine = regexp.MustCompile(`^(\w+) =>(.*)$`)
	keyModifier  = regexp.MustCompile(`key (\d+), max version (\d+)`)
	flexModifier = regexp.MustCompile(`flexible v(\d+)\+`)
	versionRange = regexp.MustCompile(`\bv(\d+)(\+|-v(\d+))`)
	tagComment   = regexp.MustCompile(`\btag (\d+)`)
	enumLine     = regexp.MustCompile(`^(\w+) (\w+)( camelcase)? \($`)
	defaultValue = regexp.MustCompile(`\([^)]*\)`)
	arrayType    = regexp.MustCompile(`^(nullable(-v\d+\+)?|varint)?\[([^\]]*)\](\w*)$`)
)

func parseDefinitions(dir string) (*definitions, error) {
	defs := &definitions{requests: map[int]*request{}, named: map[string]*structDef{}, enums: map[string]kind{}}
	if err := defs.parseEnums(filepath.Join(dir, "enums")); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "enums" {
			continue
		}
		if err := defs.parseFile(filepath.Join(dir, e.Name())); err != nil {
			return nil, err
		}
	}
	for _, r := range defs.requests {
		if err := defs.resolve(r.body, map[*structDef]bool{}); err != nil {
			return nil, err
		}
	}
	if len(defs.requests) < 50 {
		return nil, fmt.Errorf("only %d requests in %s", len(defs.requests), dir)
	}
	return defs, nil
}

func (d *definitions) parseEnums(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := enumLine.FindStringSubmatch(sc.Text()); m != nil {
			k, ok := primitives[m[2]]
			if !ok {
				return fmt.Errorf("enum %s backed by %s", m[1], m[2])
			}
			d.enums[m[1]] = k
		}
	}
	return sc.Err()
}

// parseFile reads one definitions file: top-level structures separated by
// blank lines, fields indented two spaces per level.
func (d *definitions) parseFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var (
		current *structDef
		keep    bool
		// stack[i] is the structure fields at depth i+1 go into.
		stack []*structDef
	)
	for n, line := range strings.Split(string(raw), "\n") {
		where := fmt.Sprintf("%s:%d", filepath.Base(path), n+1)
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "//") {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			current, keep, stack = nil, false, nil
			m := topLevelLine.FindStringSubmatch(line)
			if m == nil {
				return fmt.Errorf("%s: top-level line %q", where, line)
			}
			name, modifiers := m[1], m[2]
			current = &structDef{name: name}
			stack = []*structDef{current}
			switch {
			case strings.HasSuffix(name, "Request"):
				km := keyModifier.FindStringSubmatch(modifiers)
				if km == nil {
					return fmt.Errorf("%s: request %s without a key", where, name)
				}
				r := &request{flexibleMin: -1, body: current}
				r.key, _ = strconv.Atoi(km[1])
				r.maxVersion, _ = strconv.Atoi(km[2])
				if fm := flexModifier.FindStringSubmatch(modifiers); fm != nil {
					r.flexibleMin, _ = strconv.Atoi(fm[1])
				}
				d.requests[r.key] = r
				keep = true
			case strings.Contains(modifiers, "not top level"):
				d.named[name] = current
				keep = true
			}
			continue
		}
		if !keep {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if indent%2 != 0 || indent/2 > len(stack) {
			return fmt.Errorf("%s: indentation %d", where, indent)
		}
		stack = stack[:indent/2]
		f, err := parseField(trimmed, where, d.enums)
		if err != nil {
			return err
		}
		parent := stack[len(stack)-1]
		parent.fields = append(parent.fields, f)
		if f.body != nil {
			f.body.name = parent.name + f.name
			stack = append(stack, f.body)
		} else {
			// A field without an anonymous body: nothing nests under it,
			// so a deeper line is an error the next indentation check
			// catches.
			stack = append(stack, &structDef{name: "(none)"})
		}
	}
	return nil
}

// parseField reads one field line: "Name: type // comment", or the special
// ThrottleMillis and TimeoutMillis lines, both int32.
func parseField(text, where string, enums map[string]kind) (*field, error) {
	comment := ""
	if i := strings.Index(text, "//"); i >= 0 {
		text, comment = strings.TrimSpace(text[:i]), text[i+2:]
	}
	f := &field{versionMax: -1, tag: -1, line: where}
	if m := versionRange.FindStringSubmatch(comment); m != nil {
		f.versionMin, _ = strconv.Atoi(m[1])
		if m[3] != "" {
			f.versionMax, _ = strconv.Atoi(m[3])
		}
	}
	if m := tagComment.FindStringSubmatch(comment); m != nil {
		f.tag, _ = strconv.Atoi(m[1])
	}
	name, typ, ok := strings.Cut(text, ": ")
	if !ok {
		special := defaultValue.ReplaceAllString(text, "")
		if special != "ThrottleMillis" && special != "TimeoutMillis" {
			return nil, fmt.Errorf("%s: field line %q", where, text)
		}
		f.name, f.kind = special, kindInt32
		return f, nil
	}
	f.name = name
	typ = defaultValue.ReplaceAllString(typ, "")
	switch {
	case typ == "=>":
		f.kind, f.body = kindStruct, &structDef{}
	case typ == "nullable=>":
		f.kind, f.body = kindNullStruct, &structDef{}
	case strings.HasPrefix(typ, "length-field-minus"):
		f.unsupported = "length-field-minus"
	case arrayType.MatchString(typ):
		m := arrayType.FindStringSubmatch(typ)
		if m[1] == "varint" {
			f.unsupported = "varint array"
		}
		f.kind = kindArray
		switch inner := m[3]; {
		case strings.HasPrefix(inner, "=>"): // "=>" or "=>NameHint"
			f.elem, f.body = kindStruct, &structDef{}
		default:
			elem, err := scalarKind(inner, enums)
			if err != nil {
				f.elem, f.ref = kindStruct, inner
			} else {
				f.elem = elem
			}
		}
	default:
		k, err := scalarKind(typ, enums)
		if err != nil {
			f.kind, f.ref = kindStruct, typ
		} else {
			f.kind = k
		}
	}
	return f, nil
}

var nullableStringSince = regexp.MustCompile(`^nullable-string-v\d+\+$`)

// scalarKind is the kind of a primitive, string, bytes or enum type.
func scalarKind(typ string, enums map[string]kind) (kind, error) {
	if k, ok := primitives[typ]; ok {
		return k, nil
	}
	if nullableStringSince.MatchString(typ) {
		return kindString, nil
	}
	if name, ok := strings.CutPrefix(typ, "enum-"); ok {
		if k, ok := enums[name]; ok {
			return k, nil
		}
		return "", fmt.Errorf("unknown enum %s", name)
	}
	return "", errors.New("not a scalar")
}

// resolve replaces named-structure references under s by their
// definitions.
func (d *definitions) resolve(s *structDef, seen map[*structDef]bool) error {
	if seen[s] {
		return nil
	}
	seen[s] = true
	for _, f := range s.fields {
		if f.unsupported != "" {
			return fmt.Errorf("%s: %s in a request", f.line, f.unsupported)
		}
		if f.ref != "" {
			named, ok := d.named[f.ref]
			if !ok {
				return fmt.Errorf("%s: unknown type %s", f.line, f.ref)
			}
			f.body, f.ref = named, ""
		}
		if f.body != nil {
			if err := d.resolve(f.body, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// render writes the Go source of the schema.
func (d *definitions) render(version string) ([]byte, error) {
	var b bytes.Buffer
	source := "github.com/twmb/franz-go/generate/definitions"
	if version != "" {
		source = "github.com/twmb/franz-go@" + version + "/generate/definitions"
	}
	fmt.Fprintf(&b, "// Code generated by cmd/wireschema from %s; DO NOT EDIT.\n\n", source)
	b.WriteString("package wire\n\n")
	keys := make([]int, 0, len(d.requests))
	for k := range d.requests {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	emitted := map[*structDef]string{}
	var structs []*structDef
	var collect func(s *structDef)
	collect = func(s *structDef) {
		if _, ok := emitted[s]; ok {
			return
		}
		emitted[s] = "schema" + s.name
		structs = append(structs, s)
		for _, f := range s.fields {
			if f.body != nil {
				collect(f.body)
			}
		}
	}
	for _, k := range keys {
		collect(d.requests[k].body)
	}
	b.WriteString("// requestSchemas is the layout of each request kmsg decodes, by api key.\n")
	b.WriteString("var requestSchemas = map[int16]requestSchema{\n")
	for _, k := range keys {
		r := d.requests[k]
		fmt.Fprintf(&b, "\t%d: {versionMax: %d, flexibleMin: %d, body: &%s},\n", k, r.maxVersion, r.flexibleMin, emitted[r.body])
	}
	b.WriteString("}\n\n")
	for _, s := range structs {
		fmt.Fprintf(&b, "var %s = schemaStruct{name: %q, fields: []schemaField{\n", emitted[s], s.name)
		for _, f := range s.fields {
			fmt.Fprintf(&b, "\t{name: %q, kind: %s", f.name, f.kind)
			if f.versionMin != 0 {
				fmt.Fprintf(&b, ", versionMin: %d", f.versionMin)
			}
			versionMax := "versionUnbounded"
			if f.versionMax >= 0 {
				versionMax = strconv.Itoa(f.versionMax)
			}
			fmt.Fprintf(&b, ", versionMax: %s, tag: %d", versionMax, f.tag)
			if f.elem != "" {
				fmt.Fprintf(&b, ", elem: %s", f.elem)
			}
			if f.body != nil {
				fmt.Fprintf(&b, ", body: &%s", emitted[f.body])
			}
			b.WriteString("},\n")
		}
		b.WriteString("}}\n\n")
	}
	return format.Source(b.Bytes())
}
