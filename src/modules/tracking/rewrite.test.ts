import { describe, expect, it } from 'vitest';
import { rewriteHtml, trackedLinks } from './rewrite.ts';

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

  it('trackedLinks: the distinct URLs rewriteHtml would track, in order; not opted-out, other schemes or templated ones', () => {
    const html =
      '<a href="https://a.example/x?y=1&amp;z=2">1</a><a href="mailto:x@y.example">m</a>' +
      '<a data-postyard-track="false" href="https://keep.example/">k</a><a href="https://b.example/{{id}}">t</a>' +
      '<!-- <a href="https://comment.example/">c</a> --><area href="http://c.example/">' +
      '<a href=" https://a.example/x?y=1&z=2 ">again</a>';
    expect(trackedLinks(html)).toEqual(['https://a.example/x?y=1&z=2', 'http://c.example/']);
    const seen: string[] = [];
    rewriteHtml(html, {
      clickUrl: (url) => {
        seen.push(url);
        return url;
      },
      openUrl: null,
    });
    expect(seen).toEqual([
      'https://a.example/x?y=1&z=2',
      'https://b.example/{{id}}',
      'http://c.example/',
      'https://a.example/x?y=1&z=2',
    ]);
  });
});
