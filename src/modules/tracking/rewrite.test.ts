import { describe, expect, it } from 'vitest';
import { rewriteHtml } from './rewrite.ts';

const clickUrl = (url: string, i: number) => `https://t.example/c/${i}?${encodeURIComponent(url)}`;

describe('rewriteHtml', () => {
  it('rewrites http(s) hrefs of <a> in order, entities decoded, quotes of any kind, and leaves other bytes alone', () => {
    const html =
      '<p>Hi <a href="https://a.example/x?y=1&amp;z=2" class="b">one</a>, ' +
      "<A HREF='http://b.example/'>two</A> <a href=https://c.example/p>three</a></p>";
    expect(rewriteHtml(html, { clickUrl, openUrl: null })).toBe(
      `<p>Hi <a href="${clickUrl('https://a.example/x?y=1&z=2', 0).replace(/&/g, '&amp;')}" class="b">one</a>, ` +
        `<A href="${clickUrl('http://b.example/', 1)}">two</A> <a href="${clickUrl('https://c.example/p', 2)}">three</a></p>`,
    );
  });

  it('leaves mailto:, tel:, anchors, relative links, opted-out links, comments and scripts alone', () => {
    const html =
      '<a href="mailto:x@y.example">m</a><a href="tel:+1">t</a><a href="#top">a</a><a href="/rel">r</a>' +
      '<a data-postyard-track="false" href="https://keep.example/">k</a>' +
      '<!-- <a href="https://comment.example/">c</a> --><script>var s = \'<a href="https://script.example/">\';</script>' +
      '<img alt=\'<a href="https://attr.example/">\' src="x.png">';
    const out = rewriteHtml(html, { clickUrl, openUrl: null });
    expect(out).toBe(html.replace(' data-postyard-track="false"', ''));
  });

  it('adds the open pixel before </body>, or at the end without one', () => {
    const pixel = 'https://t.example/o/tok';
    const withBody = rewriteHtml('<html><body><p>x</p></body></html>', { clickUrl: null, openUrl: pixel });
    expect(withBody).toMatch(
      /^<html><body><p>x<\/p><img src="https:\/\/t\.example\/o\/tok" width="1" height="1" alt=""[^>]*\/><\/body><\/html>$/,
    );
    const bare = rewriteHtml('<p>x</p>', { clickUrl: null, openUrl: pixel });
    expect(bare.startsWith('<p>x</p><img src="https://t.example/o/tok"')).toBe(true);
  });

  it('returns the html unchanged when nothing is tracked', () => {
    const html = '<a href="https://a.example/">a</a>';
    expect(rewriteHtml(html, { clickUrl: null, openUrl: null })).toBe(html);
  });
});
