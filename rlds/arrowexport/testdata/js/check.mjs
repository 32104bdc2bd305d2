// An independent reader of ctxgraph exports: the Go test writes Arrow IPC
// (file and stream) and Parquet files plus a manifest of what each must
// hold; this script opens them with apache-arrow and hyparquet (a second
// implementation of both formats) and checks row counts, column names and
// values. Usage: node check.mjs MANIFEST.json
import { readFileSync } from 'node:fs';
import { tableFromIPC } from 'apache-arrow';
import { asyncBufferFromFile, parquetMetadataAsync, parquetSchema, parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';

const manifest = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let failures = 0;
let checks = 0;
const fail = (file, msg) => { failures++; console.error(`FAIL ${file}: ${msg}`); };

// norm turns what either library returns into plain JSON values.
function norm(v) {
  if (v === undefined || v === null) return null;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return v;
  if (v instanceof Date) return v.getTime();
  if (ArrayBuffer.isView(v) || Array.isArray(v)) return Array.from(v, norm);
  if (typeof v.toArray === 'function') return Array.from(v.toArray(), norm);
  if (typeof v[Symbol.iterator] === 'function') return Array.from(v, norm);
  return v;
}

function same(got, want) {
  if (Array.isArray(want)) {
    return Array.isArray(got) && got.length === want.length && want.every((w, i) => same(got[i], w));
  }
  if (typeof want === 'number' && typeof got === 'number') {
    return Math.abs(got - want) <= 1e-6 * Math.max(1, Math.abs(want));
  }
  return got === want;
}

async function open(f) {
  if (f.format === 'parquet') {
    const file = await asyncBufferFromFile(f.path);
    const metadata = await parquetMetadataAsync(file);
    const columns = parquetSchema(metadata).children.map((c) => c.element.name);
    const rows = await parquetReadObjects({ file, metadata, compressors });
    return { numRows: Number(metadata.num_rows), columns, value: (col, row) => rows[row][col] };
  }
  const table = tableFromIPC(readFileSync(f.path)); // file and stream formats alike
  return {
    numRows: table.numRows,
    columns: table.schema.fields.map((x) => x.name),
    value: (col, row) => table.getChild(col).get(row),
  };
}

for (const f of manifest.files) {
  let t;
  try {
    t = await open(f);
  } catch (e) {
    fail(f.path, `cannot open: ${e.stack || e}`);
    continue;
  }
  checks++;
  if (t.numRows !== f.rows) fail(f.path, `${t.numRows} rows, want ${f.rows}`);
  if (JSON.stringify(t.columns) !== JSON.stringify(f.columns)) {
    fail(f.path, `columns ${JSON.stringify(t.columns)}, want ${JSON.stringify(f.columns)}`);
  }
  for (const v of f.values) {
    checks++;
    const got = norm(t.value(v.column, v.row));
    if (!same(got, v.value)) {
      fail(f.path, `${v.column}[${v.row}] = ${JSON.stringify(got)}, want ${JSON.stringify(v.value)}`);
    }
  }
}
console.log(`${checks - failures} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
