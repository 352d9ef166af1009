/**
 * What the delivery worker needs to sign a message and choose its envelope sender: answered by
 * the sending-domains feature (DomainsService.signingKeyFor), used by the renderer. Its own file
 * so the render threads depend on the shape only, not on the service.
 */
export interface SigningKey {
  /** d= of the signature: the sending domain (the From domain or a parent of it). */
  domainName: string;
  keySelector: string;
  /** PKCS#8 PEM, decrypted; dkim.ts caches the parsed KeyObject per PEM. */
  privateKeyPem: string;
  /**
   * Envelope-sender domain for `bounces+<message id>@<returnPathDomain>`: `bounces.<domain>` once
   * its CNAME is verified, else the bounce host itself (which always routes back to Postyard).
   */
  returnPathDomain: string;
  /** Base URL of tracked links: the domain's verified tracking host name (tracking-host.ts); absent = POSTYARD_PUBLIC_URL. */
  trackingBase?: string;
}
