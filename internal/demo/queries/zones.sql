-- The demo's users abroad: a third in Lisbon's zone, a third in Tokyo's,
-- the rest without one (they take the shipped default, São Paulo's).
UPDATE user_profiles
   SET timezone = CASE abs(hashtext(user_id::text)) % 3 WHEN 1 THEN 'Europe/Lisbon' WHEN 2 THEN 'Asia/Tokyo' END
