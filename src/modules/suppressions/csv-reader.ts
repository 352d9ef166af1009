/**
 * A small streaming CSV (RFC 4180) record reader that knows the physical line each record starts
 * on, for import error reports ("line 7: ...").
 *
 * Why not csv-parse: its 6.x line counter counts CR and LF separately, so every CRLF file (what
 * Excel writes) reports doubled line numbers, and with `skip_records_with_error` a single bad
 * quote makes it silently drop every later record. Here a bad record is reported and the reader
 * resynchronises on the next physical line.
 *
 * Rules: fields are separated by `,`, records by LF, CRLF or a lone CR. A field that starts with
 * `"` (after optional blanks) is quoted: `""` is a literal quote and line breaks are kept. A quote
 * inside an unquoted field is taken literally. Blank lines are skipped. A UTF-8 BOM is dropped.
 * Memory is bounded: a field longer than `maxFieldChars` or a record with more than `maxFields`
 * fields is reported and skipped without being buffered.
 */

/** Where records go as soon as they are complete (an array works). */
export interface CsvSink {
  push(record: CsvRecord): unknown;
}

export interface CsvRecord {
  /** Physical line (1-based) the record starts on. */
  line: number;
  /** The record's fields, or null when the record is malformed (see `error`). */
  fields: string[] | null;
  error?: string;
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const CR = 0x0d;
const LF = 0x0a;
const SPACE = 0x20;
const TAB = 0x09;

enum S {
  /** At the start of a field (nothing but blanks seen). */
  FieldStart,
  Unquoted,
  Quoted,
  /** Just saw a quote inside a quoted field: `""` escape or the closing quote. */
  QuoteSeen,
  /** After a closing quote: only blanks, a comma or a line break may follow. */
  AfterClose,
  /** The record is bad: discard up to the end of the physical line. */
  SkipLine,
}

export class CsvRecordReader {
  private state: S = S.FieldStart;
  /** Current physical line. */
  private line = 1;
  /** Line on which the current record started. */
  private recordLine = 1;
  /** Whether the current record has any content (a blank line has none). */
  private inRecord = false;
  private prevCR = false;
  private fields: string[] = [];
  /** Field text carried over from earlier chunks or quoted segments. */
  private carry = '';
  private error: string | null = null;
  private first = true;
  private lastCharBreak = false;

  constructor(
    private readonly maxFieldChars = 8192,
    private readonly maxFields = 64,
  ) {}

  /** Parses one chunk of text, appending complete records to `out`. */
  feed(text: string, out: CsvSink): void {
    let i = 0;
    if (this.first && text.length > 0) {
      this.first = false;
      if (text.charCodeAt(0) === 0xfeff) i = 1;
    }
    const n = text.length;
    // Start index (in `text`) of the field segment being scanned, for Unquoted/Quoted states.
    let seg = i;
    for (; i < n; i++) {
      const ch = text.charCodeAt(i);
      const isBreak = ch === LF || ch === CR;
      // The LF of a CRLF pair: the CR already ended the record and counted the line.
      if (ch === LF && this.prevCR) {
        this.prevCR = false;
        if (this.state === S.Quoted) continue;
        seg = i + 1;
        continue;
      }
      this.prevCR = ch === CR;
      switch (this.state) {
        case S.FieldStart:
          if (ch === SPACE || ch === TAB) break;
          if (!this.inRecord) {
            if (isBreak) {
              this.line++;
              break; // blank line
            }
            this.inRecord = true;
            this.recordLine = this.line;
          }
          if (ch === QUOTE) {
            this.state = S.Quoted;
            seg = i + 1;
          } else if (ch === COMMA) {
            this.pushField('');
          } else if (isBreak) {
            this.pushField('');
            this.endRecord(out);
          } else {
            this.state = S.Unquoted;
            seg = i;
          }
          break;
        case S.Unquoted:
          if (ch === COMMA) {
            const value = this.carry + text.slice(seg, i);
            this.carry = '';
            if (this.pushField(value)) this.state = S.FieldStart;
          } else if (isBreak) {
            this.pushField(this.carry + text.slice(seg, i));
            this.carry = '';
            this.endRecord(out);
          }
          break;
        case S.Quoted:
          if (ch === QUOTE) {
            this.carry += text.slice(seg, i);
            this.state = S.QuoteSeen;
          } else if (isBreak) {
            this.line++;
          }
          break;
        case S.QuoteSeen:
          if (ch === QUOTE) {
            this.carry += '"';
            seg = i + 1;
            this.state = S.Quoted;
          } else if (ch === COMMA) {
            const value = this.carry;
            this.carry = '';
            if (this.pushField(value)) this.state = S.FieldStart;
          } else if (isBreak) {
            this.pushField(this.carry);
            this.carry = '';
            this.endRecord(out);
          } else if (ch === SPACE || ch === TAB) {
            this.state = S.AfterClose;
          } else {
            this.fail('Malformed quoting: a closing quote must be followed by a comma or the end of the line');
          }
          break;
        case S.AfterClose:
          if (ch === COMMA) {
            const value = this.carry;
            this.carry = '';
            if (this.pushField(value)) this.state = S.FieldStart;
          } else if (isBreak) {
            this.pushField(this.carry);
            this.carry = '';
            this.endRecord(out);
          } else if (ch !== SPACE && ch !== TAB) {
            this.fail('Malformed quoting: a closing quote must be followed by a comma or the end of the line');
          }
          break;
        case S.SkipLine:
          if (isBreak) this.endRecord(out);
          break;
      }
    }
    if (n > 0) {
      const last = text.charCodeAt(n - 1);
      this.lastCharBreak = last === LF || last === CR;
    }
    // Carry the unfinished field segment over to the next chunk, within the size bound.
    if (this.state === S.Unquoted || this.state === S.Quoted) {
      this.carry += text.slice(seg, n);
      if (this.carry.length > this.maxFieldChars) {
        const quoted = this.state === S.Quoted;
        this.fail(
          quoted
            ? 'Quoted field is not terminated or is longer than the limit'
            : `Field is longer than ${this.maxFieldChars} characters`,
        );
        if (quoted) this.error = `${this.error} (lines ${this.recordLine}-${this.line} skipped)`;
      }
    }
  }

  /** Flushes the last record (a file need not end with a line break). */
  end(out: CsvSink): void {
    switch (this.state) {
      case S.Quoted:
        this.fail(
          `Quoted field is not terminated (lines ${this.recordLine}-${this.lastCharBreak ? this.line - 1 : this.line} skipped)`,
        );
        break;
      case S.Unquoted:
        this.pushField(this.carry);
        break;
      case S.QuoteSeen:
      case S.AfterClose:
        this.pushField(this.carry);
        break;
      case S.FieldStart:
        if (this.inRecord) this.pushField('');
        break;
      default:
        break;
    }
    this.carry = '';
    if (this.inRecord || this.state === S.SkipLine) this.endRecord(out, false);
  }

  /** Adds a field to the record; false (and the record marked bad) when a bound is exceeded. */
  private pushField(value: string): boolean {
    if (this.fields.length >= this.maxFields) {
      this.fail(`Too many fields (more than ${this.maxFields})`);
      return false;
    }
    if (value.length > this.maxFieldChars) {
      this.fail(`Field is longer than ${this.maxFieldChars} characters`);
      return false;
    }
    this.fields.push(value);
    return true;
  }

  private fail(message: string): void {
    if (this.error === null) this.error = message;
    this.carry = '';
    this.fields = [];
    this.state = S.SkipLine;
  }

  private endRecord(out: CsvSink, lineBreak = true): void {
    if (this.error !== null) out.push({ line: this.recordLine, fields: null, error: this.error });
    else out.push({ line: this.recordLine, fields: this.fields });
    this.fields = [];
    this.carry = '';
    this.error = null;
    this.inRecord = false;
    this.state = S.FieldStart;
    if (lineBreak) this.line++;
  }
}
