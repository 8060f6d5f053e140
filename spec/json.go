package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
)

// MaxSize bounds a spec's JSON (1 MiB): Decode reads no more.
const MaxSize = 1 << 20

// Parse decodes one spec from its JSON and validates it. It refuses, each
// with an error that unwraps to ErrInvalid: a version other than Version
// (checked first, so a newer spec is named as such rather than for its
// fields), an unknown field at any depth, a value of the wrong type, data
// after the object, more than MaxSize bytes, and whatever Validate
// refuses.
func Parse(data []byte) (*Spec, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d a spec may have", ErrInvalid, len(data), MaxSize)
	}
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(err)
	}
	if head.Version == nil {
		return nil, &FieldError{Field: "version", Err: fmt.Errorf("missing: a spec starts with \"version\": %d", Version)}
	}
	if *head.Version != Version {
		return nil, &FieldError{Field: "version", Err: fmt.Errorf("%d is not supported: this build reads version %d (a newer spec needs a newer gvx)", *head.Version, Version)}
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return nil, jsonError(err)
	}
	if err := exactKeys(tree, reflect.TypeFor[Spec](), ""); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	s := new(Spec)
	if err := dec.Decode(s); err != nil {
		return nil, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the spec's closing brace", ErrInvalid)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Decode reads r to its end (at most MaxSize bytes) and parses it.
func Decode(r io.Reader) (*Spec, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// ReadFile parses the spec in the file at path; errors name the path.
func ReadFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Marshal validates s and returns its JSON, which Parse reads back to an
// equal Spec.
func (s *Spec) Marshal() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// exactKeys refuses a key that is not, letter for letter, the JSON name of
// a field of t (encoding/json alone would take "Image" or "IMAGE" for
// "image").
func exactKeys(v any, t reflect.Type, path string) error {
	switch t.Kind() {
	case reflect.Slice:
		if a, ok := v.([]any); ok {
			for i, e := range a {
				if err := exactKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a type error, which the decoder reports
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			e := obj[k]
			f, ok := fieldByJSONName(t, k)
			if !ok {
				where := ""
				if path != "" {
					where = " in " + path
				}
				return fmt.Errorf("%w: unknown field %q%s (names are snake_case and case-sensitive; version %d has no such field; see docs/runtime.md, \"The episode spec\")", ErrInvalid, k, where, Version)
			}
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if err := exactKeys(e, f.Type, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// jsonError turns encoding/json's errors into ones that name the field and
// unwrap to ErrInvalid.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Errorf("%w: a spec is a JSON object, not a JSON %s", ErrInvalid, te.Value)
		}
		return &FieldError{Field: te.Field, Err: fmt.Errorf("want a %s, not a JSON %s", te.Type, te.Value)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &se) && strings.Contains(se.Error(), "unexpected end"):
		return fmt.Errorf("%w: empty or truncated JSON", ErrInvalid)
	case errors.As(err, &se) && strings.Contains(se.Error(), "after top-level value"):
		return fmt.Errorf("%w: data after the spec's closing brace (byte %d)", ErrInvalid, se.Offset)
	case errors.As(err, &se):
		return fmt.Errorf("%w: not JSON at byte %d: %v", ErrInvalid, se.Offset, err)
	}
	// DisallowUnknownFields reports `json: unknown field "x"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("%w: unknown field %s (version %d has no such field; see docs/runtime.md, \"The episode spec\")", ErrInvalid, name, Version)
	}
	return fmt.Errorf("%w: %v", ErrInvalid, err)
}
