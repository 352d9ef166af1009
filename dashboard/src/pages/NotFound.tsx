import { PageHeader } from '../components/ui.tsx';
import { Link } from '../lib/router.tsx';

export function NotFound() {
  return (
    <>
      <PageHeader title="Page not found" />
      <p>
        There is no page here. Go to the <Link to="/">overview</Link>.
      </p>
    </>
  );
}
