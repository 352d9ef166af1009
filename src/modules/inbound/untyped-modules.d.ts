/**
 * The little of mailsplit and libqp that mime-walk.ts uses. Both come with mailparser (its MIME
 * splitter and its quoted-printable codec) and ship no type declarations.
 */
declare module 'mailsplit' {
  import type { Transform } from 'node:stream';

  interface SplitterOptions {
    /** Keep message/rfc822 parts as bodies instead of descending into them. */
    ignoreEmbedded?: boolean;
    /** More MIME nodes than this fail the stream (EMAXLEN). */
    maxChildNodes?: number;
    maxHeadSize?: number;
  }
  const mailsplit: { Splitter: new (options?: SplitterOptions) => Transform };
  export default mailsplit;
}

declare module 'libqp' {
  const libqp: { decode(text: string): Buffer };
  export default libqp;
}
