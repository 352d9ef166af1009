/** The streaming CSV reader behind imports: fields, quoting, physical line numbers, recovery, bounds. */
import { describe, expect, it } from 'vitest';
import { type CsvRecord, CsvRecordReader } from './csv-reader.ts';

/** Reads `text` fed in pieces of `size` characters. */
function read(text: string, size = text.length || 1, reader = new CsvRecordReader()): CsvRecord[] {
  const out: CsvRecord[] = [];
  for (let i = 0; i < text.length; i += size) reader.feed(text.slice(i, i + size), out);
  reader.end(out);
  return out;
}

const TRICKY =
  '\uFEFFidentifier,type\r\n' + // 1
  '\r\n' + // 2
  'a@b.com,email\r\n' + // 3
  '"x\r\ny@b.com",email\r\n' + // 4-5
  'bad"q,email\r\n' + // 6
  '  spaced@x.com  , email \r\n' + // 7
  '"quoted, comma@x.com",email\n' + // 8 (LF only: mixed endings)
  '"bad"x,email\r\n' + // 9
  'next@x.com\r' + // 10 (lone CR)
  '"esc ""q""",a\r\n' + // 11
  ',,\r\n' + // 12
  '"unterminated,email\r\n' + // 13
  'c@d.com\r\n'; // 14

const EXPECTED: CsvRecord[] = [
  { line: 1, fields: ['identifier', 'type'] },
  { line: 3, fields: ['a@b.com', 'email'] },
  { line: 4, fields: ['x\r\ny@b.com', 'email'] },
  { line: 6, fields: ['bad"q', 'email'] },
  { line: 7, fields: ['spaced@x.com  ', 'email '] },
  { line: 8, fields: ['quoted, comma@x.com', 'email'] },
  { line: 9, fields: null, error: expect.stringMatching(/closing quote/) as unknown as string },
  { line: 10, fields: ['next@x.com'] },
  { line: 11, fields: ['esc "q"', 'a'] },
  { line: 12, fields: ['', '', ''] },
  {
    line: 13,
    fields: null,
    error: expect.stringMatching(/not terminated \(lines 13-14 skipped\)/) as unknown as string,
  },
];

describe('CsvRecordReader', () => {
  it('parses fields and reports the physical line each record starts on (CRLF, LF, CR)', () => {
    expect(read(TRICKY)).toEqual(EXPECTED);
  });

  it('gives the same answer however the input is split into chunks', () => {
    for (const size of [1, 2, 3, 5, 7, 13, 64]) expect(read(TRICKY, size), `chunk size ${size}`).toEqual(EXPECTED);
  });

  it('handles a last record without a line break, and empty input', () => {
    expect(read('a,b\nc,"d"')).toEqual([
      { line: 1, fields: ['a', 'b'] },
      { line: 2, fields: ['c', 'd'] },
    ]);
    expect(read('')).toEqual([]);
    expect(read('\n \n\r\n')).toEqual([]);
    expect(read('a,\n')).toEqual([{ line: 1, fields: ['a', ''] }]);
  });

  it('bounds memory: an overlong field or too many fields is a bad record, and reading resumes on the next line', () => {
    const reader = new CsvRecordReader(100, 5);
    const text = `ok\n${'x'.repeat(500)}\n1,2,3,4,5,6\n"${'y'.repeat(500)}\nafter\n`;
    const out = read(text, 64, reader);
    expect(out.map((r) => [r.line, r.fields, r.error ? r.error.slice(0, 20) : undefined])).toEqual([
      [1, ['ok'], undefined],
      [2, null, 'Field is longer than'],
      [3, null, 'Too many fields (mor'],
      [4, null, 'Quoted field is not '],
      [5, ['after'], undefined],
    ]);
  });
});
