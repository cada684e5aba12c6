// checkotlp: reads a serialized OTLP ExportProfilesServiceRequest (what
// `fleetprof record` writes to DIR/profile.otlp.pb), decodes it with the
// official generated Go types and checks the dictionary rules fleetprof
// promises: every table starts with its zero entry and holds no duplicate,
// every reference is in range, no field is unknown to the official schema.
// It prints one line per resource and every function name, then "OK", and
// exits 1 after printing "error: ..." lines if a rule is broken.
//
// usage: checkotlp FILE
package main

import (
	"fmt"
	"os"
	"sort"

	collectorprofiles "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	common "go.opentelemetry.io/proto/slim/otlp/common/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

var errors []string

func fail(format string, args ...any) {
	errors = append(errors, fmt.Sprintf(format, args...))
}

func inRange(what string, i int32, n int) {
	if i < 0 || int(i) >= n {
		fail("%s: index %d out of range (table has %d entries)", what, i, n)
	}
}

// checkUnknown fails for every field the official schema does not know.
func checkUnknown(path string, m protoreflect.Message) {
	if len(m.GetUnknown()) > 0 {
		fail("%s: %d bytes of fields unknown to the official schema", path, len(m.GetUnknown()))
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				checkUnknown(fmt.Sprintf("%s[%d]", p, i), l.Get(i).Message())
			}
		case fd.IsMap():
		case fd.Message() != nil:
			checkUnknown(p, v.Message())
		}
		return true
	})
}

// table checks that entry 0 is the zero value and that no entry repeats.
func table[T proto.Message](name string, entries []T) {
	if len(entries) == 0 {
		fail("%s: empty (entry 0 must be the zero value)", name)
		return
	}
	seen := map[string]int{}
	opts := proto.MarshalOptions{Deterministic: true}
	for i, e := range entries {
		b, err := opts.Marshal(e)
		if err != nil {
			fail("%s[%d]: %v", name, i, err)
			continue
		}
		if i == 0 && len(b) != 0 {
			fail("%s[0] is not the zero value", name)
		}
		if j, dup := seen[string(b)]; dup {
			fail("%s[%d] duplicates %s[%d]", name, i, name, j)
		}
		seen[string(b)] = i
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: checkotlp FILE")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	var req collectorprofiles.ExportProfilesServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		fmt.Fprintln(os.Stderr, "error: unmarshal:", err)
		os.Exit(1)
	}
	checkUnknown("request", req.ProtoReflect())
	d := req.GetDictionary()
	if d == nil {
		fmt.Fprintln(os.Stderr, "error: no dictionary")
		os.Exit(1)
	}

	strs := d.GetStringTable()
	if len(strs) == 0 || strs[0] != "" {
		fail("string_table[0] must be \"\"")
	}
	dup := map[string]int{}
	for i, s := range strs {
		if j, ok := dup[s]; ok {
			fail("string_table[%d] duplicates string_table[%d] (%q)", i, j, s)
		}
		dup[s] = i
	}
	table("mapping_table", d.GetMappingTable())
	table("location_table", d.GetLocationTable())
	table("function_table", d.GetFunctionTable())
	table("link_table", d.GetLinkTable())
	table("attribute_table", d.GetAttributeTable())
	table("stack_table", d.GetStackTable())

	ns, na := len(strs), len(d.GetAttributeTable())
	nm, nl, nf := len(d.GetMappingTable()), len(d.GetLocationTable()), len(d.GetFunctionTable())
	nst, nk := len(d.GetStackTable()), len(d.GetLinkTable())
	for i, a := range d.GetAttributeTable() {
		inRange(fmt.Sprintf("attribute_table[%d].key_strindex", i), a.GetKeyStrindex(), ns)
		inRange(fmt.Sprintf("attribute_table[%d].unit_strindex", i), a.GetUnitStrindex(), ns)
		if v, ok := a.GetValue().GetValue().(*common.AnyValue_StringValueStrindex); ok {
			inRange(fmt.Sprintf("attribute_table[%d].value", i), v.StringValueStrindex, ns)
		}
	}
	for i, m := range d.GetMappingTable() {
		inRange(fmt.Sprintf("mapping_table[%d].filename_strindex", i), m.GetFilenameStrindex(), ns)
		for _, a := range m.GetAttributeIndices() {
			inRange(fmt.Sprintf("mapping_table[%d].attribute_indices", i), a, na)
		}
	}
	for i, l := range d.GetLocationTable() {
		inRange(fmt.Sprintf("location_table[%d].mapping_index", i), l.GetMappingIndex(), nm)
		for _, line := range l.GetLines() {
			inRange(fmt.Sprintf("location_table[%d].lines.function_index", i), line.GetFunctionIndex(), nf)
		}
		for _, a := range l.GetAttributeIndices() {
			inRange(fmt.Sprintf("location_table[%d].attribute_indices", i), a, na)
		}
	}
	for i, f := range d.GetFunctionTable() {
		inRange(fmt.Sprintf("function_table[%d].name_strindex", i), f.GetNameStrindex(), ns)
		inRange(fmt.Sprintf("function_table[%d].system_name_strindex", i), f.GetSystemNameStrindex(), ns)
		inRange(fmt.Sprintf("function_table[%d].filename_strindex", i), f.GetFilenameStrindex(), ns)
	}
	for i, s := range d.GetStackTable() {
		for _, l := range s.GetLocationIndices() {
			inRange(fmt.Sprintf("stack_table[%d].location_indices", i), l, nl)
		}
	}

	str := func(i int32) string {
		if i < 0 || int(i) >= ns {
			return "(bad)"
		}
		return strs[i]
	}
	nsamples := 0
	for i, rp := range req.GetResourceProfiles() {
		service := "(none)"
		for _, kv := range rp.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, sp := range rp.GetScopeProfiles() {
			for j, p := range sp.GetProfiles() {
				where := fmt.Sprintf("resource_profiles[%d].profiles[%d]", i, j)
				if p.GetSampleType() == nil || p.GetPeriodType() == nil {
					fail("%s: no sample_type or period_type", where)
				}
				inRange(where+".sample_type", p.GetSampleType().GetTypeStrindex(), ns)
				inRange(where+".sample_type", p.GetSampleType().GetUnitStrindex(), ns)
				inRange(where+".period_type", p.GetPeriodType().GetTypeStrindex(), ns)
				inRange(where+".period_type", p.GetPeriodType().GetUnitStrindex(), ns)
				for _, a := range p.GetAttributeIndices() {
					inRange(where+".attribute_indices", a, na)
				}
				var total int64
				for k, s := range p.GetSamples() {
					w := fmt.Sprintf("%s.samples[%d]", where, k)
					inRange(w+".stack_index", s.GetStackIndex(), nst)
					inRange(w+".link_index", s.GetLinkIndex(), nk)
					for _, a := range s.GetAttributeIndices() {
						inRange(w+".attribute_indices", a, na)
					}
					if len(s.GetValues()) != 1 {
						fail("%s: %d values, expected 1", w, len(s.GetValues()))
					}
					for _, v := range s.GetValues() {
						total += v
					}
				}
				nsamples += len(p.GetSamples())
				fmt.Printf("resource: service.name=%s samples=%d total=%d type=%s/%s period=%d %s/%s\n",
					service, len(p.GetSamples()), total,
					str(p.GetSampleType().GetTypeStrindex()), str(p.GetSampleType().GetUnitStrindex()),
					p.GetPeriod(), str(p.GetPeriodType().GetTypeStrindex()), str(p.GetPeriodType().GetUnitStrindex()))
			}
		}
	}

	names := map[string]bool{}
	for _, f := range d.GetFunctionTable()[min(1, nf):] {
		names[str(f.GetNameStrindex())] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		fmt.Printf("function: %s\n", n)
	}
	types := map[string]int{}
	for _, l := range d.GetLocationTable()[min(1, nl):] {
		t := "(none)"
		for _, a := range l.GetAttributeIndices() {
			if a >= 0 && int(a) < na && str(d.GetAttributeTable()[a].GetKeyStrindex()) == "profile.frame.type" {
				t = d.GetAttributeTable()[a].GetValue().GetStringValue()
			}
		}
		types[t]++
	}
	fmt.Printf("frames: kernel=%d native=%d other=%d\n", types["kernel"], types["native"],
		nl-min(1, nl)-types["kernel"]-types["native"])
	fmt.Printf("tables: strings=%d attributes=%d mappings=%d locations=%d functions=%d stacks=%d links=%d samples=%d\n",
		ns, na, nm, nl, nf, nst, nk, nsamples)
	if len(errors) > 0 {
		for _, e := range errors {
			fmt.Fprintln(os.Stderr, "error:", e)
		}
		os.Exit(1)
	}
	fmt.Println("OK")
}
