/**
 * The dashboard's calls to its JSON API (/dashboard/api). Every state-changing request carries
 * the CSRF token of the session in X-CSRF-Token; cookies are same-origin and httpOnly.
 */
export interface ErrorDetail {
  code: string;
  message: string;
  field?: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly errors: ErrorDetail[],
    readonly retryAfter: number | null = null,
  ) {
    super(errors[0]?.message ?? `Request failed (${status})`);
  }

  /** The message for one form field, if the server named it. */
  field(name: string): string | undefined {
    return this.errors.find((e) => e.field === name || e.field?.startsWith(`${name}[`))?.message;
  }
}

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

let csrfToken = '';
let onUnauthorized: () => void = () => {};

export function setCsrfToken(token: string) {
  csrfToken = token;
}

/** Called when a signed-in call answers 401 (session expired or ended elsewhere). */
export function setUnauthorizedHandler(fn: () => void) {
  onUnauthorized = fn;
}

const BASE = '/dashboard/api';

async function parseError(res: Response): Promise<ApiError> {
  let errors: ErrorDetail[] = [{ code: 'http_error', message: `The server answered ${res.status} ${res.statusText}` }];
  try {
    const body = (await res.json()) as { errors?: ErrorDetail[] };
    if (Array.isArray(body.errors) && body.errors.length) errors = body.errors;
  } catch {
    // not JSON: keep the generic message
  }
  const retry = Number(res.headers.get('retry-after'));
  return new ApiError(res.status, errors, Number.isFinite(retry) && retry > 0 ? retry : null);
}

export async function api<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(BASE + path, {
      method,
      headers,
      credentials: 'same-origin',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiError(0, [
      { code: 'network_error', message: 'Cannot reach the Postyard server. Check your connection.' },
    ]);
  }
  if (!res.ok) {
    const err = await parseError(res);
    if (res.status === 401 && err.errors[0]?.code === 'unauthorized') onUnauthorized();
    throw err;
  }
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

/** Builds a query string from the non-empty values. */
export function query(params: Record<string, string | number | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export interface ImportReport {
  imported: number;
  skipped: number;
  errors: { line: number; message: string }[];
}

/** Uploads a CSV file for import, reporting upload progress (0..1). XHR: fetch has no upload progress. */
export function uploadSuppressionsCsv(file: File, onProgress: (fraction: number) => void): Promise<ImportReport> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `${BASE}/suppressions/import`);
    xhr.setRequestHeader('x-csrf-token', csrfToken);
    xhr.setRequestHeader('accept', 'application/json');
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.onerror = () =>
      reject(new ApiError(0, [{ code: 'network_error', message: 'The upload failed: network error' }]));
    xhr.onload = () => {
      let body: unknown = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // fall through
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1);
        resolve(body as ImportReport);
        return;
      }
      const errors = (body as { errors?: ErrorDetail[] } | null)?.errors ?? [
        { code: 'http_error', message: `The server answered ${xhr.status}` },
      ];
      if (xhr.status === 401) onUnauthorized();
      reject(new ApiError(xhr.status, errors));
    };
    const form = new FormData();
    form.append('file', file);
    xhr.send(form);
  });
}
