package delivery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// maxParamNameLen bounds a parameter name quoted in an error.
const maxParamNameLen = 64

// decodeParams reads a message's message_params (raw JSON text, or nil for
// SQL NULL) into the strings the catalog and the transports take.
//
// What renders: SQL NULL, JSON null or {} (no params); an object whose
// values are strings, taken as they are, or numbers, taken as their JSON
// text ({"count": 3} renders like {"count": "3"}). What fails: anything
// else — a top-level array, string, number or boolean, and a value that is
// an object, an array, a boolean or null. The error names the field and
// what it holds, never its value: params may carry user content.
func decodeParams(raw *string) (map[string]string, error) {
	if raw == nil {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(*raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("message_params is not valid JSON")
	}
	var obj map[string]any
	switch t := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		obj = t
	default:
		return nil, fmt.Errorf("message_params is %s; want an object of strings", jsonKind(v))
	}
	params := make(map[string]string, len(obj))
	for name, value := range obj {
		switch t := value.(type) {
		case string:
			params[name] = t
		case json.Number:
			params[name] = t.String()
		default:
			return nil, fmt.Errorf("message_params.%s is %s; want a string or a number", quoteName(name), jsonKind(value))
		}
	}
	return params, nil
}

// jsonKind names the JSON type of a decoded value, with its article.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a JSON object"
	case []any:
		return "a JSON array"
	case string:
		return "a JSON string"
	case bool:
		return "a JSON boolean"
	default:
		return "a JSON number"
	}
}

// quoteName quotes a parameter name for an error, clipped and on one line.
func quoteName(name string) string {
	r := []rune(name)
	if len(r) > maxParamNameLen {
		name = string(r[:maxParamNameLen]) + "…"
	}
	return strconv.Quote(name)
}
