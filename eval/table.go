package eval

import (
	"fmt"
	"strings"
)

// Row is one system's line of a results table: its name and its metric values by name.
type Row struct {
	System string
	Scores map[string]float64
}

// FormatTable renders rows as a plain-text table, one line per system and one column per
// metric in the order given, values with four decimals ("-" where a row lacks the metric),
// columns padded to line up. The result ends with a newline.
func FormatTable(metrics []string, rows []Row) string {
	header := append([]string{"system"}, metrics...)
	cells := [][]string{header}
	for _, r := range rows {
		line := []string{r.System}
		for _, m := range metrics {
			if v, ok := r.Scores[m]; ok {
				line = append(line, fmt.Sprintf("%.4f", v))
			} else {
				line = append(line, "-")
			}
		}
		cells = append(cells, line)
	}
	return FormatCells(cells)
}

// FormatCells lays out a table of text cells, the first line the header, every line as long
// as it: the first column flush left, the others flush right, two spaces apart, columns padded
// to line up (widths in runes). The result ends with a newline.
func FormatCells(cells [][]string) string {
	width := make([]int, len(cells[0]))
	for _, line := range cells {
		for j, c := range line {
			width[j] = max(width[j], len([]rune(c)))
		}
	}
	var b strings.Builder
	for _, line := range cells {
		for j, c := range line {
			pad := strings.Repeat(" ", width[j]-len([]rune(c)))
			switch {
			case j == 0:
				b.WriteString(c + pad) // names flush left
			default:
				b.WriteString("  " + pad + c) // numbers flush right
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
