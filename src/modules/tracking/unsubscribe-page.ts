/** The hosted unsubscribe pages: no tenant text, no scripts, nothing that varies per message. */
const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}' +
  'button{font:inherit;padding:.6rem 1.2rem;border:0;border-radius:.3rem;background:#1a56db;color:#fff;cursor:pointer}';

function shell(body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex"><title>Unsubscribe</title><style>${STYLE}</style></head><body>${body}</body></html>`;
}

/** GET /u/<token>: asks; posting the form (to the same URL) unsubscribes. */
export function unsubscribePage(): string {
  return shell(
    '<h1>Unsubscribe</h1><p>Stop receiving marketing email from this sender? Messages you need, such as receipts and password resets, still arrive.</p>' +
      '<form method="post"><input type="hidden" name="confirm" value="1"><button type="submit">Unsubscribe</button></form>',
  );
}

export function unsubscribeDonePage(): string {
  return shell('<h1>You are unsubscribed</h1><p>You will not receive marketing email from this sender any more.</p>');
}
