package sqlfile

import (
	"context"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
)

// Fields binds a statement's named parameters (@as_of) from v's fields:
// v is a struct, or a pointer to one, whose fields are tagged with the
// name they bind (`db:"as_of"`). It is for the statements make sql cannot
// type, those that run among objects which exist only while they run (a
// generator's temporary tables and functions), so that their arguments
// are still typed fields rather than a map. A name the
// statement uses that no field carries is an error, and v may carry names
// the statement does not use. An embedded struct's fields are v's own; a
// nil embedded pointer carries none, so a struct can say that a group of
// names is not there yet.
func Fields(v any) pgx.QueryRewriter { return fields{v} }

type fields struct{ v any }

// RewriteQuery implements pgx.QueryRewriter: it reads the names from the
// fields, then binds those the statement uses (bind).
func (f fields) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	named := map[string]any{}
	if err := collect(reflect.ValueOf(f.v), named); err != nil {
		return "", nil, err
	}
	used, err := names(ctx, sql)
	if err != nil {
		return "", nil, err
	}
	return bind(ctx, conn, sql, args, used, named)
}

// collect adds v's tagged fields to named, and those of the structs it
// embeds.
func collect(v reflect.Value, named map[string]any) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return fmt.Errorf("sqlfile.Fields: %s is not a struct", v.Type())
	}
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		name, tagged := sf.Tag.Lookup("db")
		switch {
		case sf.Anonymous && !tagged:
			if err := collect(v.Field(i), named); err != nil {
				return err
			}
		case !tagged || name == "":
			return fmt.Errorf("sqlfile.Fields: %s.%s has no db tag naming its parameter", v.Type(), sf.Name)
		case !sf.IsExported():
			return fmt.Errorf("sqlfile.Fields: %s.%s is not exported", v.Type(), sf.Name)
		default:
			if _, dup := named[name]; dup {
				return fmt.Errorf("sqlfile.Fields: two fields bind @%s", name)
			}
			named[name] = v.Field(i).Interface()
		}
	}
	return nil
}
