-- Dry run of cleanup_delete_receipts.sql: how many kept receipts
-- (engagement_receipt_inbox) came before @cutoff.
SELECT count(*) AS kept_receipts FROM engagement_receipt_inbox WHERE received_at < @cutoff
