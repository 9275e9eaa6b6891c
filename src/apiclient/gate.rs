//! How many requests of one kind (reads, or writes) kcm's API client keeps in flight: as
//! many as its callers start, until the server refuses one for its in-flight limit (429),
//! then a cap that TCP's congestion window would keep: half the requests in flight at the
//! refusal, at most once a round (a refusal of a request sent before the last cut does
//! not cut again), growing by one for each cap's worth of answers.
//!
//! Why: a controller's window of creates (500 by default) is larger than an apiserver's
//! limit on writes in flight (200 by default in kube-apiserver and kcm). Sent again after
//! the second `Retry-After` asks, each refused create held its place in the window while
//! it waited, and a scale-up through the API ran at half the rate of one whose syncs simply
//! stopped at the first 429. Under the cap, a refused request waits for a place among the
//! requests in flight instead; only a request refused with the cap already at one waits the
//! `Retry-After` (`apiclient::send`), so a server whose limit another client holds is not
//! asked again and again.

use std::sync::Mutex;

use tokio::sync::Notify;

/// The cap on one kind of request in flight, and the requests in it.
#[derive(Default)]
pub(super) struct Gate {
    state: Mutex<State>,
    freed: Notify,
}

#[derive(Debug, Default)]
struct State {
    in_flight: usize,
    /// `None` until a refusal; then the requests that may be in flight (its integer part,
    /// at least one).
    cap: Option<f64>,
    /// Bumped by each cut: a refusal of a request sent in an earlier round does not cut
    /// again.
    round: u64,
}

impl State {
    fn admits(&self) -> bool {
        self.cap
            .is_none_or(|cap| (self.in_flight as f64) < cap.floor().max(1.0))
    }

    /// A request sent in `round` was refused: cut the cap to half the requests in flight,
    /// once a round. Whether the cap was already at one: the request then waits before it
    /// is sent again.
    fn refused(&mut self, round: u64) -> bool {
        let at_one = self.cap.is_some_and(|cap| cap < 2.0);
        if round == self.round {
            let half = (self.in_flight as f64 / 2.0).max(1.0);
            self.cap = Some(self.cap.map_or(half, |cap| cap.min(half)));
            self.round += 1;
        }
        at_one
    }

    fn answered(&mut self) {
        if let Some(cap) = &mut self.cap {
            *cap += 1.0 / *cap;
        }
    }
}

/// How a request's last answer counts for the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// The server acted on it, or answered it with anything but a refusal for its limit
    /// (a 404 or a 409 is an answer): the cap grows.
    Served,
    /// Refused for the server's in-flight limit (429): the cap is cut.
    Refused,
    /// No answer (the connection failed, the time ran out): says nothing of the server's
    /// limit, so the cap neither grows nor is cut.
    Lost,
}

/// A place among the requests in flight, given back when dropped.
pub(super) struct Pass<'a> {
    gate: &'a Gate,
    round: u64,
}

impl Gate {
    /// Waits for a place among the requests in flight.
    pub(super) async fn enter(&self) -> Pass<'_> {
        loop {
            let freed = self.freed.notified();
            {
                let mut state = self.state.lock().expect("gate");
                if state.admits() {
                    state.in_flight += 1;
                    return Pass {
                        gate: self,
                        round: state.round,
                    };
                }
            }
            freed.await;
        }
    }
}

impl Pass<'_> {
    /// The request ended with `answer`. Whether, refused, it should wait before it is
    /// sent again (the cap is at one).
    pub(super) fn ended(self, answer: Answer) -> bool {
        let mut state = self.gate.state.lock().expect("gate");
        match answer {
            Answer::Served => {
                state.answered();
                false
            }
            Answer::Refused => state.refused(self.round),
            Answer::Lost => false,
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.gate.state.lock().expect("gate").in_flight -= 1;
        self.gate.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_cap_until_a_refusal_then_half_the_requests_in_flight_once_a_round() {
        let mut state = State {
            in_flight: 500,
            ..State::default()
        };
        assert!(state.admits());
        // The first refusal cuts to half of 500; the other 299 refusals of the same round
        // do not cut again, however few are in flight by then.
        assert!(!state.refused(0));
        assert_eq!(state.cap, Some(250.0));
        state.in_flight = 201;
        for _ in 0..299 {
            state.refused(0);
        }
        assert_eq!(state.cap, Some(250.0));
        assert!(state.admits());
        // A request sent after the cut and refused cuts again.
        state.in_flight = 250;
        assert!(!state.admits());
        state.refused(1);
        assert_eq!(state.cap, Some(125.0));
    }

    #[test]
    fn the_cap_grows_by_one_a_round_of_answers_and_a_refusal_at_one_waits() {
        let mut state = State {
            in_flight: 8,
            ..State::default()
        };
        state.refused(0);
        assert_eq!(state.cap, Some(4.0));
        for _ in 0..4 {
            state.answered();
        }
        let cap = state.cap.unwrap();
        assert!((4.9..5.1).contains(&cap), "{cap}");
        // Down to one: a refusal then says wait.
        state.in_flight = 1;
        assert!(!state.refused(1));
        assert_eq!(state.cap, Some(1.0));
        assert!(state.refused(2));
        // One request is always admitted.
        state.in_flight = 0;
        assert!(state.admits());
    }

    #[tokio::test]
    async fn a_lost_request_neither_grows_nor_cuts_the_cap_and_gives_its_place_back() {
        let gate = Gate::default();
        let cap = || gate.state.lock().unwrap().cap;
        let (refused, lost) = (gate.enter().await, gate.enter().await);
        // Two in flight at the refusal: a cap of one, and no wait (it was not at one yet).
        assert!(!refused.ended(Answer::Refused));
        assert_eq!(cap(), Some(1.0));
        assert!(!lost.ended(Answer::Lost));
        assert_eq!(cap(), Some(1.0));
        assert_eq!(gate.state.lock().unwrap().in_flight, 0);
        gate.enter().await.ended(Answer::Served);
        assert_eq!(cap(), Some(2.0));
    }
}
