/**
 * The `Location` of a click's redirect. A tracked link's URL is the href as
 * written in the html, entities decoded, so it may hold CR, LF, other controls, spaces or
 * characters outside Latin-1 (`https://shop.example/caf&#233;&#10;`, `https://例え.jp/パス`).
 * Such a header value made Node refuse the response: the click answered 500.
 *
 * A URL of printable ASCII is sent as written. Any other goes through the WHATWG URL parser,
 * which is what a browser would have done with the href had it not been tracked: tabs and
 * newlines dropped, the host in punycode, everything else outside ASCII percent-encoded as
 * UTF-8. What the parser cannot read (or leaves unsafe) has every byte outside printable ASCII
 * percent-encoded, so the answer is always a redirect with a valid header, never a 500.
 */
const PRINTABLE_ASCII = /^[\x21-\x7e]*$/;
const UNSAFE = /[^\x21-\x7e]/gu;

function percentEncode(ch: string): string {
  // A lone surrogate becomes U+FFFD (EF BF BD), as UTF-8 encoders do.
  let out = '';
  for (const byte of Buffer.from(ch, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

export function redirectTarget(url: string): string {
  if (PRINTABLE_ASCII.test(url)) return url;
  let href = url;
  try {
    href = new URL(url).href;
  } catch {
    // Not a URL the parser accepts: encode what a header cannot carry and redirect anyway.
  }
  return href.replace(UNSAFE, percentEncode);
}
