// Aligns rows of cells into a plain-text table: numbers right-aligned, text left-aligned.
// Knows nothing about benchmarks; render-report.ts decides what goes in the cells.

export type Align = 'left' | 'right';

export interface Column {
  readonly header: string;
  readonly align: Align;
}

export function renderTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string[] {
  const widths = columns.map((column, i) => Math.max(column.header.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    columns
      .map((column, i) => {
        const cell = cells[i] ?? '';
        const width = widths[i] ?? 0;
        return column.align === 'right' ? cell.padStart(width) : cell.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header)), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
}
