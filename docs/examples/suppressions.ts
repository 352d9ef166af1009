import { Postyard } from '@postyard/client';

const client = new Postyard({ apiKey: process.env.POSTYARD_KEY!, baseUrl: process.env.POSTYARD_URL! });

// JSON: all or nothing, up to 10,000 items.
await client.suppressions.upsert({
  items: [
    { identifier: 'bob@example.com', type: 'email', reason_category: 'unsubscribe', description: 'asked by phone' },
  ],
});

// CSV (a string, bytes or a Blob): bad rows are skipped and reported by line.
const csv = 'identifier,type,reason_category\ncarol@example.com,email,manual\nspam.example,domain,complaint\n';
const report = await client.suppressions.import(csv);
console.log(report); // { imported: 2, skipped: 0, errors: [] }

// Every page, one item at a time.
for await (const s of client.suppressions.iterate({ type: 'email' })) {
  console.log(s.identifier, s.reason_category, s.source);
}
