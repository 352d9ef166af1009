import { Postyard, PostyardError } from '@postyard/client';

const client = new Postyard({ apiKey: process.env.POSTYARD_KEY!, baseUrl: process.env.POSTYARD_URL! });

try {
  await client.transmissions.send({ recipients: [{ email: 'not-an-address' }], content: { subject: 'Hi', text: 'x' } });
} catch (err) {
  if (!(err instanceof PostyardError)) throw err;
  // status 0 means no answer at all (PostyardNetworkError: code network_error or timeout).
  console.log(err.status, err.code); // 422 validation_failed
  console.log(err.fieldErrors); // { 'recipients[0].email': ['not a valid email address'] }
  console.log(`ask the operator about request ${err.requestId}`); // the answer's X-Request-ID
}
