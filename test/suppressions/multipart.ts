import { randomBytes } from 'node:crypto';

/** Test helper: a multipart/form-data body built by hand (what app.inject needs: a Buffer and its content-type). */
export interface MultipartPart {
  name: string;
  /** Present for a file part. */
  filename?: string;
  contentType?: string;
  content: string | Buffer;
}

export function multipartBody(parts: MultipartPart[]): { payload: Buffer; contentType: string } {
  const boundary = `----postyard${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.contentType) head += `Content-Type: ${p.contentType}\r\n`;
    chunks.push(
      Buffer.from(`${head}\r\n`),
      Buffer.isBuffer(p.content) ? p.content : Buffer.from(p.content),
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** The usual case: one CSV file part named "file". */
export function csvUpload(csv: string | Buffer, name = 'file') {
  return multipartBody([{ name, filename: 'suppressions.csv', contentType: 'text/csv', content: csv }]);
}
