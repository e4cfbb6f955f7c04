package sqlitedb

import (
	"database/sql"
	"strings"
)

// EachRow calls row for every row of a query's answer (rows, err), then closes it.
func EachRow(rows *sql.Rows, err error, row func() error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// In is the placeholders of an IN list of the values, "?,?,?", with their
// arguments.
func In[T any](values []T) (string, []any) {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return strings.TrimSuffix(strings.Repeat("?,", len(values)), ","), args
}
